//! What the model reads of terminal output when it asks for plain text: the bytes
//! run through a VT parser ([`vte`]) that keeps printed characters and applies the few
//! controls that decide what a line finally shows — carriage return (a progress bar
//! overwrites itself), backspace (line editing), erase-in-line — and drops every other
//! escape sequence (colours, cursor moves, titles). Not a screen emulator: a full-screen
//! program (`top`, an editor) comes out as its text in drawing order.

use vte::{Params, Parser, Perform};

#[derive(Default)]
struct Lines {
    done: String,
    line: Vec<char>,
    col: usize,
}

impl Lines {
    fn put(&mut self, c: char) {
        if self.col < self.line.len() {
            self.line[self.col] = c;
        } else {
            self.line.resize(self.col, ' ');
            self.line.push(c);
        }
        self.col += 1;
    }

    fn newline(&mut self) {
        self.done.extend(self.line.drain(..));
        self.done.push('\n');
        self.col = 0;
    }
}

impl Perform for Lines {
    fn print(&mut self, c: char) {
        self.put(c);
    }

    fn execute(&mut self, byte: u8) {
        match byte {
            b'\n' | 0x0b | 0x0c => self.newline(),
            b'\r' => self.col = 0,
            0x08 => self.col = self.col.saturating_sub(1),
            b'\t' => {
                let next = (self.col / 8 + 1) * 8;
                while self.col < next {
                    self.put(' ');
                }
            }
            _ => {}
        }
    }

    fn csi_dispatch(&mut self, params: &Params, _: &[u8], _: bool, action: char) {
        let first = params.iter().next().and_then(|p| p.first().copied()).unwrap_or(0);
        match action {
            // Erase in line: 0 to the end, 1 to the start, 2 all.
            'K' => match first {
                0 => self.line.truncate(self.col),
                1 => {
                    let n = self.col.min(self.line.len());
                    self.line[..n].fill(' ');
                }
                _ => self.line.clear(),
            },
            // Cursor forward / back (bash's line editing uses them).
            'C' => self.col += first.max(1) as usize,
            'D' => self.col = self.col.saturating_sub(first.max(1) as usize),
            'G' => self.col = (first.max(1) as usize) - 1,
            _ => {}
        }
    }
}

/// `bytes` as plain text (see the module doc). Trailing spaces of each line are cut.
pub fn plain(bytes: &[u8]) -> String {
    let mut lines = Lines::default();
    Parser::new().advance(&mut lines, bytes);
    let mut out = lines.done;
    out.extend(lines.line);
    out.lines().map(str::trim_end).collect::<Vec<_>>().join("\n") + if out.ends_with('\n') { "\n" } else { "" }
}

/// How many leading bytes of `b` end on a whole UTF-8 character (at most 3 held back).
pub fn complete_utf8(b: &[u8]) -> usize {
    for back in 1..=3.min(b.len()) {
        let i = b.len() - back;
        let c = b[i];
        if c & 0xC0 == 0x80 {
            continue; // a continuation byte: look further back
        }
        let need = match c {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if back < need { i } else { b.len() };
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_go_carriage_returns_and_backspaces_apply() {
        assert_eq!(plain(b"\x1b[1;32mok\x1b[0m done\r\n"), "ok done\n");
        assert_eq!(plain(b"10%\r20%\r100%\n"), "100%\n");
        assert_eq!(plain(b"ecoh\x08\x08ho\n"), "echo\n");
        assert_eq!(plain(b"abcdef\r\x1b[Kxy"), "xy");
        assert_eq!(plain(b"a\tb"), "a       b");
        assert_eq!(plain(b"\x1b]0;title\x07$ ls\r\n"), "$ ls\n");
        assert_eq!(plain("中文\n".as_bytes()), "中文\n");
    }

    #[test]
    fn a_cut_character_is_held_back() {
        let s = "a中".as_bytes();
        assert_eq!(complete_utf8(s), 4);
        assert_eq!(complete_utf8(&s[..3]), 1);
        assert_eq!(complete_utf8(&s[..2]), 1);
        assert_eq!(complete_utf8(b"abc"), 3);
        assert_eq!(complete_utf8(b""), 0);
        assert_eq!(complete_utf8(&[0xff]), 1, "garbage is not held back");
    }
}
