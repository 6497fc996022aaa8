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
        let idf = unpack(IDF_ZST, "IDF table");
        let mut idf = std::io::BufReader::new(idf.as_slice());
        let mut tfidf = TfIdf::new(Some(&mut idf), KeywordExtractConfig::default());
        match config.build() {
            Ok(c) => *tfidf.config_mut() = c,
            Err(e) => tracing::warn!("keyword extractor keeps jieba's defaults: {e}"),
        }
        Self {
            jieba: load_jieba(),
            tfidf,
        }
    }
}

/// jieba's dictionary (`dict.txt` of jieba-rs 0.8), zstd-compressed: the crate's own
/// embedded copy is turned off (`default-features = false`) because deflate left it
/// 0.8 MB larger in the binary (`homed` <= 25 MB). Same data, same segmentation.
static DICT_ZST: &[u8] = include_bytes!("../../assets/jieba-dict.txt.zst");
/// jieba's IDF table (`idf.txt` of jieba-rs 0.8), zstd-compressed.
static IDF_ZST: &[u8] = include_bytes!("../../assets/jieba-idf.txt.zst");

fn unpack(zst: &[u8], what: &str) -> Vec<u8> {
    zstd::stream::decode_all(zst).unwrap_or_else(|e| panic!("the embedded jieba {what} is corrupt: {e}"))
}

/// A segmenter over jieba's standard dictionary (about 1 s: build it once and share).
pub fn load_jieba() -> Jieba {
    let dict = unpack(DICT_ZST, "dictionary");
    Jieba::with_dict(&mut std::io::BufReader::new(dict.as_slice())).expect("the embedded jieba dictionary parses")
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
}
