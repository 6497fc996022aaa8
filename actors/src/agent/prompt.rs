//! Building the messages of a task's prefix (kernel spec §1.14, §3.2, §7.4).

use super::channels::Channels;
use super::input::Input;
use crate::i18n::Msg;
use crate::llm::Message;
use crate::memory::recall::MemoryText;

// The interrupt mark ([`Msg::InterruptMark`]) and the continuation placeholders
// ([`Msg::ContinueAfterTools`], [`Msg::ContinueAfterSend`]) come from the catalog.

/// The settings a prompt is built from.
#[derive(Debug, Clone, Default)]
pub struct PromptSettings {
    pub system_prompt: String,
    /// The owner's standing instructions (`core.agent.personal_prompt`; a resident's
    /// task is appended to its copy).
    pub personal_prompt: String,
    /// The persona (`DATA/personal/personal.md`), read when the task starts.
    pub persona: Option<std::sync::Arc<str>>,
    /// No persona and no instructions yet, and this is the main agent: the prompt
    /// carries the first-run block ([`Msg::PersonaGate`]).
    pub first_run: bool,
    /// The skill index (name: description per line); the bodies come via `skill_info`.
    pub skills: String,
}

/// The system prompt, in the seed's layering: the base rules, the persona (who the
/// agent is), the owner's standing instructions (a resident's task among them), the
/// first-run block while there is no persona, then the kernel's own rules and the
/// output rules for the channels.
pub fn system_prompt(s: &PromptSettings, channels: &Channels) -> String {
    let mut p = String::new();
    p.push_str(s.system_prompt.trim());
    if let Some(persona) = s.persona.as_deref() {
        p.push_str("\n\n# Persona\n");
        p.push_str(persona.trim());
    }
    if s.first_run {
        p.push_str("\n\n");
        p.push_str(&Msg::PersonaGate.text());
    }
    if !s.personal_prompt.trim().is_empty() {
        p.push_str("\n\n# Personality\n");
        p.push_str(s.personal_prompt.trim());
    }
    p.push_str(&format!(
        "\n\n# Interrupts\n\
         A system message starting with {} is an interrupt from a tool, plugin or timer, \
         not something the user said. Handle it all the same.\n",
        Msg::InterruptMark.text().trim_end()
    ));
    p.push_str(
        "\n# Tools\n\
         Tool calls of one round run in parallel when every tool allows it; sends to the same \
         channel keep their order. Do not rely on any other ordering within a round.\n\
         \n# Output\n\
         Your final text is not broadcast anywhere by itself. Look at the source information of \
         the input to know where it came from.\n",
    );
    for c in channels.all() {
        if c.sync {
            p.push_str(&format!("- `{}` is synchronous: just answer with text.\n", c.name));
        } else {
            p.push_str(&format!(
                "- `{}` is asynchronous: plain text is NOT delivered; call output_send__{} with the right meta.\n",
                c.name, c.name
            ));
        }
    }
    p.push_str(
        "You may send as many messages to as many channels as the task needs. Split very long \
         content into complete paragraphs, never mid-sentence, and do not resend identical content. \
         For long multi-step jobs, acknowledge first, then work, then report.\n\
         If unsure how to use a channel, call output_send__<channel>_help.",
    );
    if !s.skills.is_empty() {
        p.push_str("\n\n");
        p.push_str(s.skills.trim_end());
    }
    p
}

/// Where an input came from, as the prefix tells the model (the parts of an
/// [`Input`] the prompt reads; the turn core keeps these, not the whole input).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    pub source: String,
    pub channel: String,
    pub interrupt: bool,
}

impl Origin {
    pub fn of(input: &Input) -> Self {
        Self {
            source: input.source.clone(),
            channel: input.channel.clone(),
            interrupt: input.is_interrupt(),
        }
    }
}

/// The system message that tells the model where the input came from.
pub fn source_context(input: &Input) -> String {
    origin_context(&Origin::of(input))
}

/// The source-context message of an input from `o`.
pub fn origin_context(o: &Origin) -> String {
    let (source, channel) = (o.source.as_str(), o.channel.as_str());
    if o.interrupt {
        Msg::SourceContextInterrupt { source, channel }.text()
    } else {
        Msg::SourceContext { source, channel }.text()
    }
}

/// The prefix of a task: system prompt, the recalled memory and timeline (if any), the
/// guests' words recalled (if any, quoted in a `user` message: data, never system
/// text), the source context, and the input itself (a `system` message marked
/// [`Msg::InterruptMark`] for interrupts).
pub fn prefix(s: &PromptSettings, channels: &Channels, input: &Input, memory: &MemoryText) -> Vec<Message> {
    prefix_of(s, channels, &Origin::of(input), &input.text, memory)
}

/// [`prefix`] from the input's origin and (stage-rewritten) text.
pub fn prefix_of(
    s: &PromptSettings,
    channels: &Channels,
    origin: &Origin,
    text: &str,
    memory: &MemoryText,
) -> Vec<Message> {
    let mut msgs = vec![Message::text("system", system_prompt(s, channels))];
    if !memory.system.is_empty() {
        msgs.push(Message::text("system", memory.system.as_str()));
    }
    if !memory.quoted.is_empty() {
        msgs.push(Message::text("user", memory.quoted.as_str()));
    }
    msgs.push(Message::text("system", origin_context(origin)));
    if origin.interrupt {
        msgs.push(Message::text("system", format!("{}{text}", Msg::InterruptMark)));
    } else {
        msgs.push(Message::text("user", text));
    }
    msgs
}

/// Removes earlier continuation placeholders and, when the history ends with an
/// assistant or tool message, appends the right one.
pub fn add_continuation(msgs: &mut Vec<Message>, last_batch_reply_only: bool) {
    msgs.retain(|m| !(m.role == "user" && m.content.as_str().is_some_and(is_continuation)));
    if msgs.last().is_some_and(|m| m.role == "assistant" || m.role == "tool") {
        let text = if last_batch_reply_only {
            Msg::ContinueAfterSend.text()
        } else {
            Msg::ContinueAfterTools.text()
        };
        msgs.push(Message::text("user", text));
    }
}

/// Whether `text` is one of the continuation placeholders, in any language (a history
/// may predate a change of `core.agent.language`).
pub fn is_continuation(text: &str) -> bool {
    Msg::ContinueAfterTools.is(text) || Msg::ContinueAfterSend.is(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::Level;

    #[test]
    fn interrupt_inputs_are_marked_system_messages() {
        let s = PromptSettings {
            skills: String::new(),
            system_prompt: "You are HomeAgent.".into(),
            ..Default::default()
        };
        let mut i = Input::text("timer", "wake up");
        i.level = Some(Level::L3);
        let m = prefix(&s, &Channels::builtin(), &i, &MemoryText::default());
        assert_eq!(m.len(), 3);
        assert_eq!(m[2].role, "system");
        assert_eq!(m[2].content, "[Interrupt] wake up");
        assert!(m[1].content.as_str().unwrap().starts_with("This input is an interrupt"));
        let q = prefix(
            &s,
            &Channels::builtin(),
            &Input::text("http", "hi"),
            &"[Conversation timeline]\n[00:00:01] http: earlier\n".into(),
        );
        assert_eq!(q.len(), 4, "the timeline is the second system message");
        assert!(q[1].content.as_str().unwrap().starts_with("[Conversation timeline]"));
        let q = prefix(
            &s,
            &Channels::builtin(),
            &Input::text("http", "hi"),
            &MemoryText::default(),
        );
        assert_eq!((q[2].role.as_str(), q[2].content.as_str().unwrap()), ("user", "hi"));
        assert_eq!(q.len(), 3);
        assert!(q[0].content.as_str().unwrap().contains("`http` is synchronous"));
    }

    #[test]
    fn continuation_placeholders_replace_each_other() {
        let mut m = vec![Message::text("user", "hi"), Message::text("tool", "ok")];
        add_continuation(&mut m, true);
        assert_eq!(m.last().unwrap().content, Msg::ContinueAfterSend.text().as_str());
        m.push(Message::text("tool", "more"));
        add_continuation(&mut m, false);
        let placeholders = m
            .iter()
            .filter(|x| x.content.as_str().is_some_and(is_continuation))
            .count();
        assert_eq!(placeholders, 1);
        let mut first = vec![Message::text("user", "hi")];
        add_continuation(&mut first, false);
        assert_eq!(first.len(), 1, "never after the first round");
    }
}
