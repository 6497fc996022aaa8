//! The ledger's plain data and its one rule: what a call costs.

use serde::{Deserialize, Serialize};

/// What a model call was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A turn of the owner's input.
    #[default]
    OwnerTurn,
    /// A turn of a guest's input (a chat bridge's other people).
    GuestTurn,
    /// The kernel's own upkeep (the merge and review heartbeats' tasks).
    Heartbeat,
    /// A helper's turn (a sub-agent a turn spawned and waits for: the turn's work).
    SubAgent,
    /// A resident sub-agent's round (its own schedule, the triage offload): background
    /// work, like the heartbeats'.
    Resident,
    /// Describing an image for a source without vision.
    Vision,
    /// `homed selftest` and the settings page's "test this source".
    Selftest,
}

impl Kind {
    pub const ALL: [Kind; 7] = [
        Kind::OwnerTurn,
        Kind::GuestTurn,
        Kind::Heartbeat,
        Kind::SubAgent,
        Kind::Resident,
        Kind::Vision,
        Kind::Selftest,
    ];

    /// The kind a ledger row names ([`Kind::as_str`]).
    pub fn named(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Work nobody waits on: it counts in the background limits and runs on
    /// `core.llm.background_source` when one is set.
    pub fn is_background(self) -> bool {
        matches!(self, Kind::Heartbeat | Kind::Resident)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::OwnerTurn => "owner_turn",
            Kind::GuestTurn => "guest_turn",
            Kind::Heartbeat => "heartbeat",
            Kind::SubAgent => "sub_agent",
            Kind::Resident => "resident",
            Kind::Vision => "vision",
            Kind::Selftest => "selftest",
        }
    }
}

/// Who a call is on behalf of, carried with the request to the LLM actor.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Purpose {
    pub kind: Kind,
    /// The guest's principal; empty for the owner and the kernel.
    pub principal: String,
}

impl Purpose {
    pub fn of(kind: Kind) -> Self {
        Self {
            kind,
            principal: String::new(),
        }
    }
}

/// One call that answered, as the ledger keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Call {
    pub ts_ms: i64,
    pub source: String,
    pub model: String,
    pub kind: Kind,
    pub principal: String,
    pub input: u64,
    pub output: u64,
    /// Input tokens the vendor served from its cache (part of `input`).
    pub cached: u64,
    /// The vendor reported no usage: the daemon counted the tokens itself (o200k).
    pub estimated: bool,
    /// Millionths of a US dollar; `None` when the price table has no entry for the model.
    pub cost_micros: Option<i64>,
}

/// What a model costs, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Cached input; the input price when absent.
    #[serde(default)]
    pub cached: Option<f64>,
}

/// The owner's price table (`core.llm.prices`): model name (or a `*` glob) → price,
/// the first match in the order written wins. The owner's, because vendors change
/// prices and the daemon cannot know a self-hosted model's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prices(Vec<(String, Price)>);

/// Why the price table could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "core.llm.prices must be an object of model → {{\"input\": $/Mtok, \"output\": $/Mtok, \"cached\"?: $/Mtok}}, e.g. {{\"gpt-4o-mini\": {{\"input\": 0.15, \"output\": 0.6}}}}: {0}"
)]
pub struct PricesError(String);

impl Prices {
    /// Reads the setting's value (`{}` and `null` are an empty table).
    pub fn parse(v: &serde_json::Value) -> Result<Self, PricesError> {
        let serde_json::Value::Object(m) = v else {
            return if v.is_null() {
                Ok(Self::default())
            } else {
                Err(PricesError(format!("got {v}")))
            };
        };
        let mut out = Vec::with_capacity(m.len());
        for (model, p) in m {
            let price: Price = serde_json::from_value(p.clone()).map_err(|e| PricesError(format!("`{model}`: {e}")))?;
            let ok = |x: f64| x.is_finite() && x >= 0.0;
            if !(ok(price.input) && ok(price.output) && price.cached.is_none_or(ok)) {
                return Err(PricesError(format!("`{model}`: prices are dollars ≥ 0")));
            }
            out.push((model.clone(), price));
        }
        Ok(Self(out))
    }

    /// The price of `model`, if the table has one.
    pub fn of(&self, model: &str) -> Option<Price> {
        self.0
            .iter()
            .find(|(g, _)| crate::pattern::glob(g, model))
            .map(|(_, p)| *p)
    }

    /// What `input` (of which `cached`) and `output` tokens of `model` cost, in
    /// millionths of a dollar (rounded to the nearest).
    pub fn cost_micros(&self, model: &str, input: u64, cached: u64, output: u64) -> Option<i64> {
        let p = self.of(model)?;
        let cached = cached.min(input);
        let dollars_per_mtok =
            (input - cached) as f64 * p.input + cached as f64 * p.cached.unwrap_or(p.input) + output as f64 * p.output;
        // $/Mtok × tokens = micro-dollars.
        Some(dollars_per_mtok.round() as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_call_costs_what_the_owners_table_says() {
        let p = Prices::parse(&json!({
            "gpt-4o-mini": {"input": 0.15, "output": 0.6, "cached": 0.075},
            "claude-*": {"input": 3.0, "output": 15.0},
        }))
        .unwrap();
        // 10,000 in (4,000 cached) and 1,000 out: 6,000×0.15 + 4,000×0.075 + 1,000×0.6 µ$.
        assert_eq!(p.cost_micros("gpt-4o-mini", 10_000, 4_000, 1_000), Some(1_800));
        assert_eq!(p.cost_micros("claude-sonnet-4", 1_000_000, 0, 0), Some(3_000_000));
        assert_eq!(
            p.cost_micros("llama3", 1_000, 0, 1_000),
            None,
            "no price: unknown, not free"
        );
        assert!(Prices::parse(&json!({"m": {"input": -1, "output": 0}})).is_err());
        assert!(Prices::parse(&json!({"m": {"input": 1}})).is_err());
        assert!(Prices::parse(&json!([1])).is_err());
        assert_eq!(Prices::parse(&json!(null)), Ok(Prices::default()));
    }
}
