//! JSON text ↔ Lua values for the adapters' `json.decode` / `json.encode`, built on the
//! Lua stack directly.
//!
//! Why not mlua's serde bridge: through it every table, key and string of a request is a
//! registry reference created, set and released one at a time — measured at about 5,000
//! instructions a JSON value, nearly half of a turn's kernel CPU (every turn converts its
//! request twice and every stream chunk twice). Here a text is first parsed by serde_json
//! into a flat tape (serde_json's own grammar, number rules and nesting limit), then the
//! tape becomes Lua tables in one protected call (`lua_createtable` with exact sizes,
//! `lua_rawset`); encoding walks tables with `lua_next` and writes leaves through
//! serde_json, so escapes and number formats are serde_json's.
//!
//! The rules are those of mlua's serde with default options, which the adapters were
//! written against (a differential test in this module holds the two equal):
//! - decode: arrays get mlua's array metatable, `null` is `json.null`, integers beyond
//!   `i64` become floats, duplicate keys keep the last, invalid or trailing text is `nil`;
//! - encode: a table with a positive raw length or the array metatable is an array of
//!   `1..#t` (holes are `null`), any other table an object in `next` order; `nil` and
//!   `json.null` are `null`; non-finite floats are `null`; a string that is not UTF-8 is
//!   an array of its bytes; integer, float and boolean keys are quoted; functions,
//!   threads, userdata and a table inside itself are errors.
//!
//! Safety: Lua reports errors (out of memory under the sandbox's limit) with `longjmp`,
//! which must not cross Rust frames that own values with destructors. Everything that
//! owns memory (the tape, the output buffer, the path of open tables) lives outside the
//! protected call; the code inside holds only references and `Copy` values, and does
//! not panic (no indexing that can fail, no allocation-failure paths but Lua's).

use std::ffi::c_void;
use std::io::Write as _;

use mlua::{Lua, LuaSerdeExt, Value as LuaValue, ffi};
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};

/// Deepest nesting either direction accepts. serde_json refuses deeper text on its own
/// (128); for encoding it bounds the recursion over a script's tables.
const MAX_DEPTH: usize = 128;

/// One value of a parsed text, in document order; containers carry their element count
/// and are followed by their elements (objects: key, value, key, value…).
#[derive(Clone, Copy, Debug)]
enum Tok {
    Null,
    Bool(bool),
    Int(i64),
    Num(f64),
    /// Bytes `at..at + len` of [`Tape::text`].
    Str {
        at: usize,
        len: usize,
    },
    Arr(usize),
    Obj(usize),
}

#[derive(Default)]
struct Tape {
    toks: Vec<Tok>,
    /// Every string's bytes, one after another (keys included).
    text: Vec<u8>,
}

impl Tape {
    fn push_str(&mut self, s: &str) {
        let at = self.text.len();
        self.text.extend_from_slice(s.as_bytes());
        self.toks.push(Tok::Str { at, len: s.len() });
    }
}

/// Appends one value (and everything inside it) to the tape.
struct Seed<'t>(&'t mut Tape);

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.toks.push(Tok::Null);
        Ok(())
    }

    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.0.toks.push(Tok::Bool(v));
        Ok(())
    }

    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        self.0.toks.push(Tok::Int(v));
        Ok(())
    }

    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        // As mlua converts a u64: an integer when it fits, else the nearest float.
        self.0.toks.push(i64::try_from(v).map_or(Tok::Num(v as f64), Tok::Int));
        Ok(())
    }

    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        self.0.toks.push(Tok::Num(v));
        Ok(())
    }

    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.0.push_str(v);
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let at = self.0.toks.len();
        self.0.toks.push(Tok::Arr(0));
        let mut n = 0;
        while seq.next_element_seed(Seed(&mut *self.0))?.is_some() {
            n += 1;
        }
        self.0.toks[at] = Tok::Arr(n);
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let at = self.0.toks.len();
        self.0.toks.push(Tok::Obj(0));
        let mut n = 0;
        while map.next_key_seed(Seed(&mut *self.0))?.is_some() {
            map.next_value_seed(Seed(&mut *self.0))?;
            n += 1;
        }
        self.0.toks[at] = Tok::Obj(n);
        Ok(())
    }
}

/// `json.decode`: the Lua value of a JSON text, `nil` when the text is not one JSON value.
pub fn decode(lua: &Lua, text: &[u8]) -> mlua::Result<LuaValue> {
    let mut tape = Tape::default();
    let mut de = serde_json::Deserializer::from_slice(text);
    if Seed(&mut tape).deserialize(&mut de).is_err() || de.end().is_err() {
        return Ok(LuaValue::Nil);
    }
    if let [one] = tape.toks.as_slice() {
        // A bare scalar (a stream's `[DONE]`-like payloads, numbers): no stack work.
        return Ok(match *one {
            Tok::Null => lua.null(),
            Tok::Bool(b) => LuaValue::Boolean(b),
            Tok::Int(i) => LuaValue::Integer(i),
            Tok::Num(n) => LuaValue::Number(n),
            Tok::Str { .. } => LuaValue::String(lua.create_string(&tape.text)?),
            Tok::Arr(_) | Tok::Obj(_) => return build_value(lua, &tape),
        });
    }
    build_value(lua, &tape)
}

fn build_value(lua: &Lua, tape: &Tape) -> mlua::Result<LuaValue> {
    let (toks, text) = (tape.toks.as_slice(), tape.text.as_slice());
    let mut built = false;
    // SAFETY: `build` follows the protected-call rules of the module doc: it holds only
    // references and `Copy` values, and leaves exactly its result on the stack.
    let v: LuaValue = unsafe {
        lua.exec_raw(lua.array_metatable(), |state| {
            built = build(state, toks, text);
        })
    }?;
    if built {
        Ok(v)
    } else {
        Err(mlua::Error::runtime(
            "json.decode: the Lua stack cannot hold a value this deep; flatten the JSON",
        ))
    }
}

/// One open container while building: where its next element goes.
#[derive(Clone, Copy)]
struct Open {
    object: bool,
    /// Elements still to come.
    left: usize,
    /// Arrays: the index of the next element; objects: whether a key is on the stack.
    next: i64,
}

/// Builds the tape's value on top of `state`'s stack, whose slot 1 holds the array
/// metatable, then moves it to slot 1 (the only value left). Answers false, leaving the
/// stack as it was given, when the stack cannot grow enough.
///
/// # Safety
/// `state` is a live Lua state inside a protected call; `toks` is a well-formed tape
/// (containers followed by exactly their elements) whose strings lie inside `text`.
unsafe fn build(state: *mut ffi::lua_State, toks: &[Tok], text: &[u8]) -> bool {
    unsafe {
        // Two slots per open container (the table, a pending key) and one for the value.
        if ffi::lua_checkstack(state, (2 * MAX_DEPTH + 8) as i32) == 0 {
            return false;
        }
        let mut open = [Open {
            object: false,
            left: 0,
            next: 0,
        }; MAX_DEPTH + 2];
        let mut depth = 0usize;
        for tok in toks {
            match *tok {
                Tok::Null => ffi::lua_pushlightuserdata(state, std::ptr::null_mut()),
                Tok::Bool(b) => ffi::lua_pushboolean(state, b as i32),
                Tok::Int(i) => ffi::lua_pushinteger(state, i),
                Tok::Num(n) => ffi::lua_pushnumber(state, n),
                Tok::Str { at, len } => {
                    let s = text.get(at..at + len).unwrap_or_default();
                    ffi::lua_pushlstring(state, s.as_ptr().cast(), s.len());
                }
                Tok::Arr(n) | Tok::Obj(n) => {
                    let object = matches!(tok, Tok::Obj(_));
                    let size = i32::try_from(n).unwrap_or(i32::MAX);
                    if object {
                        ffi::lua_createtable(state, 0, size);
                    } else {
                        ffi::lua_createtable(state, size, 0);
                        ffi::lua_pushvalue(state, 1);
                        ffi::lua_setmetatable(state, -2);
                    }
                    if n > 0 {
                        if depth + 1 >= open.len() {
                            return false;
                        }
                        open[depth] = Open {
                            object,
                            left: n,
                            next: 1,
                        };
                        depth += 1;
                        continue;
                    }
                }
            }
            // A complete value is on top: store it in the open container, closing every
            // container it completes.
            while depth > 0 {
                let o = &mut open[depth - 1];
                if o.object {
                    if o.next == 1 {
                        // The key: wait for its value.
                        o.next = 0;
                        break;
                    }
                    ffi::lua_rawset(state, -3);
                    o.next = 1;
                } else {
                    ffi::lua_rawseti(state, -2, o.next);
                    o.next += 1;
                }
                o.left -= 1;
                if o.left > 0 {
                    break;
                }
                depth -= 1;
            }
        }
        ffi::lua_replace(state, 1);
        true
    }
}

/// Why a value has no JSON text (`json.encode` raises it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    Unsupported(&'static str),
    Recursive,
    TooDeep,
    KeyNotString,
    KeyNotFinite,
}

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unsupported(t) => write!(
                f,
                "json.encode: unsupported value type `{t}`; pass tables, strings, numbers, booleans or json.null"
            ),
            Self::Recursive => f.write_str("json.encode: recursive table detected (a table contains itself)"),
            Self::TooDeep => write!(f, "json.encode: tables nested deeper than {MAX_DEPTH} levels"),
            Self::KeyNotString => f.write_str("json.encode: key must be a string, number or boolean"),
            Self::KeyNotFinite => f.write_str("json.encode: float key must be finite (got NaN or +/-inf)"),
        }
    }
}

/// `json.encode`: the JSON text of a Lua value.
pub fn encode(lua: &Lua, v: LuaValue) -> mlua::Result<String> {
    let mut out = Vec::with_capacity(256);
    let mut path = [std::ptr::null::<c_void>(); MAX_DEPTH];
    let mut result = Ok(());
    // SAFETY: `encode_at` follows the protected-call rules of the module doc; the value
    // is slot 1 and the array metatable slot 2 of the protected call's stack.
    unsafe {
        lua.exec_raw::<()>((v, lua.array_metatable()), |state| {
            result = encode_at(state, 1, &mut out, &mut path, 0);
            ffi::lua_settop(state, 0);
        })
    }?;
    result.map_err(|e| mlua::Error::runtime(e.to_string()))?;
    // Strings are written only when they are UTF-8 (others become byte arrays).
    String::from_utf8(out).map_err(mlua::Error::external)
}

/// Writes a leaf through serde_json (its escapes and number formats). Writing to a
/// `Vec` cannot fail.
fn leaf<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    let _ = serde_json::to_writer(&mut *out, v);
}

/// Writes the value at stack slot `idx` (absolute) as JSON. Slot 2 is the array
/// metatable; `path` holds the tables being written around it (a table met again inside
/// itself is an error, as mlua's).
///
/// # Safety
/// `state` is a live Lua state inside a protected call; `idx` is a valid absolute slot.
unsafe fn encode_at(
    state: *mut ffi::lua_State,
    idx: i32,
    out: &mut Vec<u8>,
    path: &mut [*const c_void; MAX_DEPTH],
    depth: usize,
) -> Result<(), EncodeError> {
    unsafe {
        match ffi::lua_type(state, idx) {
            ffi::LUA_TNIL => out.extend_from_slice(b"null"),
            ffi::LUA_TBOOLEAN => out.extend_from_slice(if ffi::lua_toboolean(state, idx) != 0 {
                b"true"
            } else {
                b"false"
            }),
            ffi::LUA_TNUMBER => {
                if ffi::lua_isinteger(state, idx) != 0 {
                    leaf(out, &ffi::lua_tointeger(state, idx));
                } else {
                    // serde_json writes non-finite floats as null.
                    leaf(out, &ffi::lua_tonumber(state, idx));
                }
            }
            ffi::LUA_TSTRING => write_string(out, lua_bytes(state, idx)),
            ffi::LUA_TLIGHTUSERDATA if ffi::lua_touserdata(state, idx).is_null() => out.extend_from_slice(b"null"),
            ffi::LUA_TLIGHTUSERDATA => return Err(EncodeError::Unsupported("lightuserdata")),
            ffi::LUA_TTABLE => return encode_table(state, idx, out, path, depth),
            ffi::LUA_TFUNCTION => return Err(EncodeError::Unsupported("function")),
            ffi::LUA_TTHREAD => return Err(EncodeError::Unsupported("thread")),
            _ => return Err(EncodeError::Unsupported("userdata")),
        }
        Ok(())
    }
}

/// The bytes of the string at `idx` (which must be a string: `lua_tolstring` would
/// otherwise convert a number in place).
unsafe fn lua_bytes<'a>(state: *mut ffi::lua_State, idx: i32) -> &'a [u8] {
    unsafe {
        let mut len = 0usize;
        let p = ffi::lua_tolstring(state, idx, &mut len);
        if p.is_null() {
            return &[];
        }
        std::slice::from_raw_parts(p.cast(), len)
    }
}

/// A Lua string as mlua's serde sees it: text when UTF-8, else an array of its bytes.
fn write_string(out: &mut Vec<u8>, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(s) => leaf(out, s),
        Err(_) => {
            out.push(b'[');
            for (i, b) in bytes.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                let _ = write!(out, "{b}");
            }
            out.push(b']');
        }
    }
}

unsafe fn encode_table(
    state: *mut ffi::lua_State,
    idx: i32,
    out: &mut Vec<u8>,
    path: &mut [*const c_void; MAX_DEPTH],
    depth: usize,
) -> Result<(), EncodeError> {
    unsafe {
        let me = ffi::lua_topointer(state, idx);
        if path.iter().take(depth).any(|p| *p == me) {
            return Err(EncodeError::Recursive);
        }
        let Some(slot) = path.get_mut(depth) else {
            return Err(EncodeError::TooDeep);
        };
        *slot = me;
        // Room for a key, a value and what their own tables need (checked per level).
        if ffi::lua_checkstack(state, 4) == 0 {
            return Err(EncodeError::TooDeep);
        }
        let len = ffi::lua_rawlen(state, idx);
        let array = len > 0 || {
            let has = ffi::lua_getmetatable(state, idx) != 0;
            let array = has && ffi::lua_rawequal(state, -1, 2) != 0;
            if has {
                ffi::lua_pop(state, 1);
            }
            array
        };
        if array {
            out.push(b'[');
            for i in 1..=len {
                if i > 1 {
                    out.push(b',');
                }
                ffi::lua_rawgeti(state, idx, i as ffi::lua_Integer);
                let r = encode_at(state, ffi::lua_gettop(state), out, path, depth + 1);
                ffi::lua_pop(state, 1);
                r?;
            }
            out.push(b']');
            return Ok(());
        }
        out.push(b'{');
        let mut first = true;
        ffi::lua_pushnil(state);
        while ffi::lua_next(state, idx) != 0 {
            let top = ffi::lua_gettop(state);
            if !first {
                out.push(b',');
            }
            first = false;
            let r = write_key(state, top - 1, out).and_then(|()| {
                out.push(b':');
                encode_at(state, top, out, path, depth + 1)
            });
            if r.is_err() {
                ffi::lua_pop(state, 2);
                return r;
            }
            ffi::lua_pop(state, 1);
        }
        out.push(b'}');
        Ok(())
    }
}

/// An object key as serde_json writes map keys: strings as they are, integers, floats
/// and booleans quoted.
unsafe fn write_key(state: *mut ffi::lua_State, idx: i32, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    unsafe {
        match ffi::lua_type(state, idx) {
            ffi::LUA_TSTRING => match std::str::from_utf8(lua_bytes(state, idx)) {
                Ok(s) => leaf(out, s),
                Err(_) => return Err(EncodeError::KeyNotString),
            },
            ffi::LUA_TNUMBER if ffi::lua_isinteger(state, idx) != 0 => {
                out.push(b'"');
                leaf(out, &ffi::lua_tointeger(state, idx));
                out.push(b'"');
            }
            ffi::LUA_TNUMBER => {
                let n = ffi::lua_tonumber(state, idx);
                if !n.is_finite() {
                    return Err(EncodeError::KeyNotFinite);
                }
                out.push(b'"');
                leaf(out, &n);
                out.push(b'"');
            }
            ffi::LUA_TBOOLEAN => out.extend_from_slice(if ffi::lua_toboolean(state, idx) != 0 {
                b"\"true\""
            } else {
                b"\"false\""
            }),
            _ => return Err(EncodeError::KeyNotString),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! `decode`/`encode` against the serde bridge they replace (mlua's `Serializer` /
    //! `Deserializer` through serde-transcode, default options), on generated values.
    use super::*;
    use mlua::Table;

    fn old_decode(lua: &Lua, text: &[u8]) -> LuaValue {
        let mut de = serde_json::Deserializer::from_slice(text);
        match serde_transcode::transcode(&mut de, mlua::serde::Serializer::new(lua)) {
            Ok(v) if de.end().is_ok() => v,
            _ => LuaValue::Nil,
        }
    }

    fn old_encode(v: LuaValue) -> Result<String, String> {
        let mut out = Vec::new();
        serde_transcode::transcode(
            mlua::serde::Deserializer::new(v),
            &mut serde_json::Serializer::new(&mut out),
        )
        .map_err(|e| e.to_string())?;
        String::from_utf8(out).map_err(|e| e.to_string())
    }

    /// xorshift64*: reproducible cases without a dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    const STRINGS: &[&str] = &[
        "",
        "role",
        "content",
        "quote \" backslash \\ slash / tab \t newline \n",
        "nul \u{0} bell \u{7} del \u{7f}",
        "汉字 and emoji 🦀",
        "\u{2028}\u{2029}",
        "a much longer string that goes past Lua's forty-byte limit for interned short strings",
    ];

    fn lua_string(lua: &Lua, rng: &mut Rng) -> LuaValue {
        if rng.below(12) == 0 {
            // Not UTF-8: mlua's serde writes the bytes as an array.
            return LuaValue::String(lua.create_string([0xffu8, b'a', 0xc3]).unwrap());
        }
        let s = STRINGS[rng.below(STRINGS.len() as u64) as usize];
        LuaValue::String(lua.create_string(s).unwrap())
    }

    fn lua_number(rng: &mut Rng) -> LuaValue {
        match rng.below(10) {
            0 => LuaValue::Integer(i64::MIN),
            1 => LuaValue::Integer(i64::MAX),
            2 => LuaValue::Integer(rng.next() as i64 % 1000),
            3 => LuaValue::Number(0.7),
            4 => LuaValue::Number(-0.0),
            5 => LuaValue::Number(1e300 * 10.0),
            6 => LuaValue::Number(f64::NAN),
            7 => LuaValue::Number(1.0),
            8 => LuaValue::Number(1e21),
            _ => LuaValue::Number(f64::from_bits(rng.next() >> 2)),
        }
    }

    fn lua_value(lua: &Lua, rng: &mut Rng, depth: u32) -> LuaValue {
        let leaf_only = depth > 4;
        match rng.below(if leaf_only { 6 } else { 10 }) {
            0 => LuaValue::Nil,
            1 => LuaValue::Boolean(rng.below(2) == 0),
            2 => lua.null(),
            3 => lua_number(rng),
            4 | 5 => lua_string(lua, rng),
            _ => LuaValue::Table(lua_table(lua, rng, depth + 1)),
        }
    }

    fn lua_table(lua: &Lua, rng: &mut Rng, depth: u32) -> Table {
        let t = lua.create_table().unwrap();
        let n = rng.below(5);
        match rng.below(5) {
            // A sequence, with the array metatable or without it (holes allowed).
            0 | 1 => {
                match rng.below(3) {
                    0 => t.set_metatable(Some(lua.array_metatable())).unwrap(),
                    // Any other metatable does not make an array.
                    1 => t.set_metatable(Some(lua.create_table().unwrap())).unwrap(),
                    _ => {}
                }
                for i in 1..=n {
                    t.raw_set(i, lua_value(lua, rng, depth)).unwrap();
                }
            }
            // An object with string keys.
            2 | 3 => {
                for _ in 0..n {
                    let k = lua_string(lua, rng);
                    t.raw_set(k, lua_value(lua, rng, depth)).unwrap();
                }
            }
            // Keys of every kind.
            _ => {
                for _ in 0..n {
                    let k = match rng.below(4) {
                        0 => LuaValue::Integer(rng.below(7) as i64 + 3),
                        1 => LuaValue::Number([2.5, f64::INFINITY, -0.5][rng.below(3) as usize]),
                        2 => LuaValue::Boolean(rng.below(2) == 0),
                        _ => LuaValue::Table(lua.create_table().unwrap()),
                    };
                    t.raw_set(k, lua_value(lua, rng, depth)).unwrap();
                }
            }
        }
        t
    }

    #[test]
    fn encode_writes_what_the_serde_bridge_wrote() {
        let lua = Lua::new();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut same_ok, mut same_err) = (0, 0);
        for case in 0..4000 {
            let v = lua_value(&lua, &mut rng, 0);
            let new = encode(&lua, v.clone()).map_err(|_| ());
            let old = old_encode(v.clone()).map_err(|_| ());
            assert_eq!(new, old, "case {case}: {v:#?}");
            if new.is_ok() {
                same_ok += 1;
            } else {
                same_err += 1;
            }
        }
        // Both outcomes are exercised.
        assert!(same_ok > 1000 && same_err > 100, "ok {same_ok}, errors {same_err}");
    }

    #[test]
    fn encode_refuses_what_has_no_json_text() {
        let lua = Lua::new();
        let check = |src: &str, want: &str| {
            let v: LuaValue = lua.load(src).eval().unwrap();
            let e = encode(&lua, v).unwrap_err().to_string();
            assert!(e.contains(want), "{src}: {e}");
        };
        check("local t = {} t.self = t return t", "recursive");
        check("local t = {} t[1] = {t} return t", "recursive");
        check("return {f = print}", "unsupported value type `function`");
        check("return {coroutine.create(print)}", "`thread`");
        check("local t = {} for i = 1, 200 do t = {t} end return t", "deeper than 128");
        // A table met twice side by side is not a cycle.
        let v: LuaValue = lua.load("local x = {1} return {x, x}").eval().unwrap();
        assert_eq!(encode(&lua, v).unwrap(), "[[1],[1]]");
    }

    /// Two decoded values are the same Lua data: types (integer vs float), strings,
    /// metatables (the array one or none) and every key.
    fn same(a: &LuaValue, b: &LuaValue) -> bool {
        match (a, b) {
            (LuaValue::Table(x), LuaValue::Table(y)) => {
                let mt = |t: &Table| t.metatable().map(|m| m.to_pointer());
                if mt(x) != mt(y) || x.raw_len() != y.raw_len() {
                    return false;
                }
                let count = |t: &Table| t.pairs::<LuaValue, LuaValue>().count();
                count(x) == count(y)
                    && x.pairs::<LuaValue, LuaValue>().all(|kv| {
                        let (k, v) = kv.unwrap();
                        let w: LuaValue = y.raw_get(k).unwrap();
                        same(&v, &w)
                    })
            }
            (LuaValue::Number(x), LuaValue::Number(y)) => x.to_bits() == y.to_bits(),
            (LuaValue::String(x), LuaValue::String(y)) => x.as_bytes() == y.as_bytes(),
            _ => a == b && std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }

    fn json_text(rng: &mut Rng, depth: u32, out: &mut String) {
        let leaf_only = depth > 5;
        match rng.below(if leaf_only { 7 } else { 10 }) {
            0 => out.push_str("null"),
            1 => out.push_str(["true", "false"][rng.below(2) as usize]),
            2 => out.push_str(
                [
                    "0",
                    "-0",
                    "12",
                    "-7",
                    "18446744073709551615",
                    "9223372036854775808",
                    "1.5",
                    "-0.0",
                    "1e400",
                    "2E-3",
                    "1e2",
                ][rng.below(11) as usize],
            ),
            3..=6 => out.push_str(
                [
                    r#""""#,
                    r#""plain""#,
                    r#""esc \" \\ \/ \b \f \n \r \t""#,
                    r#""\u00e9\ud83e\udd80""#,
                    r#""\ud800""#,
                    "\"汉字\"",
                ][rng.below(6) as usize],
            ),
            7 | 8 => {
                out.push('[');
                for i in 0..rng.below(5) {
                    if i > 0 {
                        out.push(',');
                    }
                    json_text(rng, depth + 1, out);
                }
                out.push(']');
            }
            _ => {
                out.push('{');
                for i in 0..rng.below(5) {
                    if i > 0 {
                        out.push(',');
                    }
                    // Few key names, so duplicates happen.
                    out.push_str(["\"a\"", "\"b\"", "\"\\u0061\"", "\"1\""][rng.below(4) as usize]);
                    out.push(':');
                    json_text(rng, depth + 1, out);
                }
                out.push('}');
            }
        }
    }

    #[test]
    fn decode_builds_what_the_serde_bridge_built() {
        let lua = Lua::new();
        let mut rng = Rng(0x51_7cc1_b727_220a);
        let mut nil = 0;
        for case in 0..4000 {
            let mut json = String::new();
            json_text(&mut rng, 0, &mut json);
            let mut text = json.into_bytes();
            match rng.below(8) {
                // Cut anywhere, even inside a character.
                0 => text.truncate(text.len() / 2),
                1 => text.extend_from_slice(b" x"),
                2 => text = [&b" \n"[..], &text, b"\t "].concat(),
                _ => {}
            }
            let new = decode(&lua, &text).unwrap();
            let old = old_decode(&lua, &text);
            let text = String::from_utf8_lossy(&text);
            assert!(same(&new, &old), "case {case}: {text}\nnew {new:#?}\nold {old:#?}");
            nil += new.is_nil() as u32;
        }
        assert!(nil > 100 && nil < 3000, "invalid texts: {nil}");
    }

    #[test]
    fn decode_nesting_follows_serde_json() {
        let lua = Lua::new();
        for depth in [1, 64, 127, 128, 129, 400] {
            let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            let new = decode(&lua, text.as_bytes()).unwrap();
            let old = old_decode(&lua, text.as_bytes());
            assert!(same(&new, &old), "depth {depth}");
            let objects = format!("{}1{}", "{\"k\":".repeat(depth), "}".repeat(depth));
            let new = decode(&lua, objects.as_bytes()).unwrap();
            assert!(
                same(&new, &old_decode(&lua, objects.as_bytes())),
                "object depth {depth}"
            );
        }
    }

    #[test]
    fn decoding_past_the_memory_limit_is_an_error_not_a_crash() {
        let lua = Lua::new();
        lua.set_memory_limit(4 << 20).unwrap();
        let big = format!("[{}]", vec!["{\"k\":\"some text\"}"; 200_000].join(","));
        let e = decode(&lua, big.as_bytes()).unwrap_err();
        assert!(matches!(e, mlua::Error::MemoryError(_)), "{e}");
        // The state is still usable.
        lua.set_memory_limit(0).unwrap();
        let v = decode(&lua, br#"{"ok":[1,2]}"#).unwrap();
        assert_eq!(encode(&lua, v).unwrap(), r#"{"ok":[1,2]}"#);
    }

    #[test]
    fn round_trips_through_a_script() {
        let lua = Lua::new();
        let json = lua.create_table().unwrap();
        json.set(
            "decode",
            lua.create_function(|lua, s: mlua::String| decode(lua, &s.as_bytes()))
                .unwrap(),
        )
        .unwrap();
        json.set(
            "encode",
            lua.create_function(|lua, v: LuaValue| encode(lua, v)).unwrap(),
        )
        .unwrap();
        json.set("null", lua.null()).unwrap();
        lua.globals().set("json", json).unwrap();
        let out: String = lua
            .load(
                r#"local r = json.decode('{"messages":[{"role":"user","content":"hi"}],"tools":[],"n":null}')
                   assert(r.n == json.null and #r.tools == 0 and r.messages[1].content == "hi")
                   r.messages[2] = {role = "assistant", content = "ok"}
                   r.n = nil
                   return json.encode(r.messages)"#,
            )
            .eval()
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v,
            serde_json::json!([{"role":"user","content":"hi"},{"role":"assistant","content":"ok"}])
        );
    }
}
