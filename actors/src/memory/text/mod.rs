//! What memory reads in a text, in English and Chinese alike: keywords (jieba), names,
//! dates, the time a question asks about, and the rule distiller's statements. (Token
//! counts are `llm::tokens`: every budget counts them, not memory alone.)

pub mod aliases;
pub mod dates;
pub mod keywords;
pub mod names;
pub mod period;
pub mod rules;
pub mod rules_en;
pub mod sentences;
