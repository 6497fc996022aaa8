//! `seq_run`: a list of tool steps run as one call — groups in parallel, stopping at
//! the first step that does not succeed, answering every step's result.
//!
//! It is built in, not a plugin: it needs the tool registry and, above all, the tool
//! runner itself. Every step goes through [`super::tools_exec::ToolRunner::run_batch`],
//! the same path as a call the model makes (tool policy and principal, `before_toolcall`,
//! alias fill, sandbox, execution, masking and review, `after_toolcall`), so a sequence
//! can never reach around the firewall. A plugin could only call tools through a
//! kernel API that would have to re-implement all of that (the seed's rule: what needs
//! an internal capability stays built in).
//!
//! This module is the pure part: the plan parsed from the arguments ([`parse`]) and
//! the report of the steps ([`report`]); the runner executes the plan.

use serde_json::{Value, json};

use crate::bus::ToolStatus;

/// The tool's name.
pub const SEQ_TOOL: &str = "seq_run";

/// Most steps in one sequence (a model looping through a plan should not fan out
/// without bound inside one call).
pub const MAX_STEPS: usize = 32;

/// One step: a tool and its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub tool: String,
    pub args: Value,
}

/// The plan: groups run one after the other; the steps of one group run together
/// (in parallel when every tool of the group allows it, see
/// [`crate::stages::ToolRegistry::batch_is_parallel`]).
pub type Plan = Vec<Vec<Step>>;

/// Why the arguments are not a plan; each says how to write one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SeqError {
    #[error("`steps` must be a non-empty array of {{\"tool\": name, \"args\": {{...}}}} or {{\"parallel\": [steps]}}")]
    NoSteps,
    #[error("step {0}: {1}")]
    BadStep(usize, String),
    #[error("too many steps ({0}); at most {MAX_STEPS} in one seq_run — split the work")]
    TooMany(usize),
}

fn step(n: usize, v: &Value) -> Result<Step, SeqError> {
    let bad = |why: &str| SeqError::BadStep(n, why.to_owned());
    let tool = v
        .get("tool")
        .and_then(Value::as_str)
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| bad("`tool` (the tool's name) is required"))?;
    if tool == SEQ_TOOL {
        return Err(bad("seq_run cannot run inside seq_run; put the steps in one list"));
    }
    let args = match v.get("args") {
        None | Some(Value::Null) => json!({}),
        Some(a @ Value::Object(_)) => a.clone(),
        // Models sometimes send the arguments as a JSON string, as in tool calls.
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(a @ Value::Object(_)) => a,
            _ => return Err(bad("`args` must be an object of the tool's arguments")),
        },
        Some(_) => return Err(bad("`args` must be an object of the tool's arguments")),
    };
    Ok(Step {
        tool: tool.to_owned(),
        args,
    })
}

/// The plan in `{"steps": [step | {"parallel": [step, ...]}, ...]}`; steps are
/// numbered from 1 in the order written.
pub fn parse(args: &Value) -> Result<Plan, SeqError> {
    let steps = args
        .get("steps")
        .and_then(Value::as_array)
        .filter(|s| !s.is_empty())
        .ok_or(SeqError::NoSteps)?;
    let mut plan = Vec::with_capacity(steps.len());
    let mut n = 0;
    for v in steps {
        let group = match v.get("parallel") {
            Some(Value::Array(inner)) if !inner.is_empty() => inner
                .iter()
                .map(|s| {
                    n += 1;
                    step(n, s)
                })
                .collect::<Result<Vec<_>, _>>()?,
            Some(_) => {
                return Err(SeqError::BadStep(
                    n + 1,
                    "`parallel` must be a non-empty array of steps".into(),
                ));
            }
            None => {
                n += 1;
                vec![step(n, v)?]
            }
        };
        plan.push(group);
    }
    if n > MAX_STEPS {
        return Err(SeqError::TooMany(n));
    }
    Ok(plan)
}

/// What one step came back with.
#[derive(Debug, Clone)]
pub struct StepResult {
    pub tool: String,
    pub status: ToolStatus,
    pub text: String,
}

fn status_str(s: ToolStatus) -> &'static str {
    match s {
        ToolStatus::Ok => "ok",
        ToolStatus::Error => "error",
        ToolStatus::Denied => "denied",
    }
}

/// The report the model reads: every step run, in order, and what was not run after
/// a failure. `ok` is whether every step succeeded.
pub fn report(plan: &Plan, results: &[StepResult]) -> (String, bool) {
    let total: usize = plan.iter().map(Vec::len).sum();
    let ok = results.len() == total && results.iter().all(|r| r.status == ToolStatus::Ok);
    let steps: Vec<Value> = results
        .iter()
        .enumerate()
        .map(|(i, r)| json!({"step": i + 1, "tool": r.tool, "status": status_str(r.status), "result": r.text}))
        .collect();
    let mut out = json!({"ok": ok, "steps": steps});
    if let Some(i) = results.iter().position(|r| r.status != ToolStatus::Ok) {
        let not_run: Vec<&str> = plan
            .iter()
            .flatten()
            .skip(results.len())
            .map(|s| s.tool.as_str())
            .collect();
        out["stopped_at"] = json!(i + 1);
        out["not_run"] = json!(not_run);
    }
    (serde_json::to_string_pretty(&out).expect("serialisable"), ok)
}

/// The tool's declaration: its description carries its usage.
pub fn spec() -> crate::stages::ToolSpec {
    let step = json!({"type": "object", "properties": {
        "tool": {"type": "string", "description": "the tool's name"},
        "args": {"type": "object", "description": "the tool's arguments"},
        "parallel": {"type": "array", "description": "instead of tool/args: steps to run together", "items": {"type": "object"}}
    }});
    let mut s = crate::stages::ToolSpec::new(
        SEQ_TOOL,
        "Run several tool calls as one: steps run in order and stop at the first one that fails; \
         a step {\"parallel\": [steps]} runs its steps together. Every step is checked like a direct call. \
         Answers JSON {ok, steps: [{step, tool, status, result}], stopped_at?, not_run?}. \
         Example: {\"steps\": [{\"tool\": \"files_write\", \"args\": {\"path\": \"a.txt\", \"content\": \"hi\"}}, \
         {\"tool\": \"files_read\", \"args\": {\"path\": \"a.txt\"}}]}",
        json!({"type": "object", "properties": {"steps": {"type": "array", "items": step}}, "required": ["steps"]}),
    );
    s.plugin = crate::stages::tools::owners::SEQ.into();
    s.no_memory = true;
    s.with_keywords("sequence, steps, one after another, batch, chain, 依次, 步骤")
}

/// The registry's handler: never reached, since the runner runs `seq_run` itself.
pub fn handler() -> std::sync::Arc<dyn crate::stages::ToolHandler> {
    use futures_util::future::BoxFuture;
    std::sync::Arc::new(|_: Value| -> BoxFuture<'static, crate::stages::ToolResult> {
        Box::pin(async { Err(crate::stages::ToolFailure::kernel(OutsideTheLoop)) })
    })
}

/// `seq_run` reached through the registry (only the runner runs it).
#[derive(Debug, thiserror::Error)]
#[error("seq_run runs only inside the agent's tool loop")]
pub struct OutsideTheLoop;

#[cfg(test)]
mod tests {
    use super::*;

    fn r(tool: &str, status: ToolStatus, text: &str) -> StepResult {
        StepResult {
            tool: tool.into(),
            status,
            text: text.into(),
        }
    }

    #[test]
    fn plans_parse_with_groups_and_string_args() {
        let plan = parse(&json!({"steps": [
            {"tool": "a", "args": {"x": 1}},
            {"parallel": [{"tool": "b"}, {"tool": "c", "args": "{\"y\": 2}"}]},
        ]}))
        .unwrap();
        assert_eq!(plan.len(), 2);
        assert_eq!(plan[0][0].args, json!({"x": 1}));
        assert_eq!(plan[1].iter().map(|s| s.tool.as_str()).collect::<Vec<_>>(), ["b", "c"]);
        assert_eq!(plan[1][0].args, json!({}));
        assert_eq!(plan[1][1].args, json!({"y": 2}));
    }

    #[test]
    fn bad_plans_say_what_to_fix() {
        let cases = [
            (json!({}), "non-empty array"),
            (json!({"steps": []}), "non-empty array"),
            (json!({"steps": [{"args": {}}]}), "step 1: `tool`"),
            (
                json!({"steps": [{"tool": "a"}, {"tool": "seq_run"}]}),
                "step 2: seq_run cannot run inside",
            ),
            (
                json!({"steps": [{"tool": "a", "args": [1]}]}),
                "`args` must be an object",
            ),
            (json!({"steps": [{"parallel": []}]}), "`parallel` must be"),
        ];
        for (args, want) in cases {
            let e = parse(&args).unwrap_err().to_string();
            assert!(e.contains(want), "{args}: {e}");
        }
        let many: Vec<Value> = (0..=MAX_STEPS).map(|_| json!({"tool": "a"})).collect();
        assert_eq!(
            parse(&json!({ "steps": many })).unwrap_err(),
            SeqError::TooMany(MAX_STEPS + 1)
        );
    }

    #[test]
    fn the_report_lists_every_step_and_what_was_not_run() {
        let plan = parse(&json!({"steps": [{"tool": "a"}, {"tool": "b"}, {"tool": "c"}]})).unwrap();
        let (text, ok) = report(&plan, &[r("a", ToolStatus::Ok, "one"), r("b", ToolStatus::Ok, "two")]);
        let _ = text;
        assert!(!ok, "a step missing is not success");
        let (text, ok) = report(
            &plan,
            &[r("a", ToolStatus::Ok, "one"), r("b", ToolStatus::Denied, "no")],
        );
        let v: Value = serde_json::from_str(&text).unwrap();
        assert!(!ok);
        assert_eq!(v["stopped_at"], 2);
        assert_eq!(v["not_run"], json!(["c"]));
        assert_eq!(v["steps"][1]["status"], "denied");
        let all: Vec<StepResult> = ["a", "b", "c"].iter().map(|t| r(t, ToolStatus::Ok, t)).collect();
        let (text, ok) = report(&plan, &all);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert!(ok && v.get("stopped_at").is_none() && v["steps"][2]["result"] == "c");
    }
}
