//! Keyword extraction with jieba (segmentation + its bundled IDF table), for recall
//! queries and the memory index. Loading the dictionary takes a moment, so one
//! [`Keywords`] lives in the actor that needs it.

use jieba_rs::{Jieba, KeywordExtract, KeywordExtractConfig, TfIdf};

/// Question and filler words that say nothing about what to recall (jieba's own stop
/// list is English-only and its IDF table ranks these high).
const STOP_WORDS: &[&str] = &[
    "哪里",
    "哪儿",
    "什么",
    "怎么",
    "怎样",
    "为什么",
    "哪个",
    "哪些",
    "多少",
    "几个",
    "是不是",
    "是否",
    "可以",
    "知道",
    "告诉",
    "一下",
    "我们",
    "你们",
    "他们",
    "这个",
    "那个",
    "还有",
    "现在",
    "之前",
    "以前",
    "记得",
    "一个",
];

/// A jieba segmenter with its TF-IDF keyword extractor.
pub struct Keywords {
    jieba: Jieba,
    tfidf: TfIdf,
}

impl Default for Keywords {
    fn default() -> Self {
        // HMM on: personal names are rarely in the dictionary and would otherwise be
        // cut into single characters, which are too short to be keywords.
        let mut config = KeywordExtractConfig::builder();
        config.use_hmm(true);
        for w in STOP_WORDS {
            config.add_stop_word((*w).to_owned());
        }
        let (dict, idf) = unpack();
        let mut idf = std::io::BufReader::new(idf.as_slice());
        let mut tfidf = TfIdf::new(Some(&mut idf), KeywordExtractConfig::default());
        match config.build() {
            Ok(c) => *tfidf.config_mut() = c,
            Err(e) => tracing::warn!("keyword extractor keeps jieba's defaults: {e}"),
        }
        Self {
            jieba: jieba_from(&dict),
            tfidf,
        }
    }
}

/// jieba's dictionary and IDF table (`dict.txt`, `idf.txt` of jieba-rs 0.8) as one
/// zstd file with each word written once (`scripts/make-jieba-assets.py` says how).
/// The crate's own embedded copy is off (`default-features = false`): deflated, the two
/// files took 1.2 MB more of the binary (`homed` <= 25 MB). Same data, same
/// segmentation, same keywords.
static JIEBA_ZST: &[u8] = include_bytes!("../../../assets/jieba.zst");

/// The dictionary's and the IDF table's texts, rebuilt from [`JIEBA_ZST`].
fn unpack() -> (Vec<u8>, Vec<u8>) {
    let packed =
        zstd::stream::decode_all(JIEBA_ZST).unwrap_or_else(|e| panic!("the embedded jieba data is corrupt: {e}"));
    let text = std::str::from_utf8(&packed).expect("the embedded jieba data is UTF-8");
    let mut lines = text.lines();
    let values: Vec<&str> = lines.next().unwrap_or("").split(' ').collect();
    let value = |i: &str| {
        i.parse::<usize>()
            .ok()
            .and_then(|i| values.get(i).copied())
            .unwrap_or_else(|| panic!("the embedded jieba data has a bad IDF index {i:?}"))
    };
    let (mut dict, mut idf) = (Vec::with_capacity(packed.len()), Vec::with_capacity(packed.len() / 2));
    for line in lines.by_ref() {
        if line == "#" {
            break;
        }
        let (entry, i) = line
            .rsplit_once(' ')
            .expect("a jieba dictionary line ends in an IDF index");
        dict.extend_from_slice(entry.as_bytes());
        dict.push(b'\n');
        if i != "-" {
            let word = entry.split(' ').next().unwrap_or(entry);
            idf.extend_from_slice(format!("{word} {}\n", value(i)).as_bytes());
        }
    }
    for line in lines {
        let (word, i) = line.rsplit_once(' ').expect("a jieba IDF line ends in an index");
        idf.extend_from_slice(format!("{word} {}\n", value(i)).as_bytes());
    }
    (dict, idf)
}

fn jieba_from(dict: &[u8]) -> Jieba {
    Jieba::with_dict(&mut std::io::BufReader::new(dict)).expect("the embedded jieba dictionary parses")
}

/// A segmenter over jieba's standard dictionary (about 1 s: build it once and share).
pub fn load_jieba() -> Jieba {
    jieba_from(&unpack().0)
}

impl Keywords {
    /// The process-wide extractor, built on first use. Jieba's dictionary costs ~1 s and
    /// tens of MB, so every tier that segments (document summaries, the graph) shares
    /// one instead of each loading its own.
    pub fn shared() -> &'static Keywords {
        static SHARED: std::sync::OnceLock<Keywords> = std::sync::OnceLock::new();
        SHARED.get_or_init(Keywords::default)
    }

    /// The segmenter itself, for callers that need words or part-of-speech tags.
    pub fn jieba(&self) -> &Jieba {
        &self.jieba
    }

    /// Up to `top_k` keywords of `text`, best first (at least 2 characters, stop words
    /// dropped). Empty when nothing qualifies.
    pub fn extract(&self, text: &str, top_k: usize) -> Vec<String> {
        self.tfidf
            .extract_keywords(&self.jieba, text, top_k, Vec::new())
            .into_iter()
            .map(|k| k.keyword)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chinese_and_english_keywords() {
        let k = Keywords::default();
        let got = k.extract("我们明天去北京出差，住在哪里？", 5);
        assert!(got.contains(&"北京".to_string()), "{got:?}");
        assert!(
            !got.contains(&"哪里".to_string()) && !got.contains(&"我们".to_string()),
            "{got:?}"
        );
        let got = k.extract("What does Rust compile to", 5);
        assert!(got.iter().any(|w| w.eq_ignore_ascii_case("rust")), "{got:?}");
        assert!(k.extract("的", 5).is_empty());
    }

    /// The packed asset gives back jieba-rs 0.8.1's two files line for line (their
    /// counts and first lines; the IDF table's order does not matter to jieba).
    #[test]
    fn the_packed_data_rebuilds_both_files() {
        let (dict, idf) = unpack();
        let (dict, idf) = (String::from_utf8(dict).unwrap(), String::from_utf8(idf).unwrap());
        assert_eq!(dict.lines().count(), 349_045);
        assert_eq!(idf.lines().count(), 270_132);
        assert!(dict.starts_with("1号店 3 n\n4S店 3 n\n"), "{}", &dict[..40]);
        assert!(idf.lines().any(|l| l == "劳动防护 13.900677652"));
    }
}
