//! What memory reads in a text, in English and Chinese alike: token counts (o200k),
//! keywords (jieba), names, dates, the time a question asks about, and the rule distiller's statements.

pub mod aliases;
pub mod bpe;
pub mod dates;
pub mod keywords;
pub mod names;
pub mod period;
pub mod rules;
pub mod rules_en;
pub mod sentences;
pub mod tokens;
