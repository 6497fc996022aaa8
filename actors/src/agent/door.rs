//! The door: every input is checked once on its way in, and what passed is an
//! [`Admitted`] — the only thing a scheduler queues and a task runs.
//!
//! # Why a type
//!
//! The checks an input needs (secrets masked to their `@{alias}`, its channel's
//! definition applied, not blank, not over the text cap) used to be asked again and
//! again along its path — by the HTTP route, the intake, the scheduler and the task —
//! because no stage could tell whether an earlier one had. Now the intake (or whoever
//! makes the agent's own inputs) passes each input through this module once, and the
//! scheduler's [`super::scheduler::Submit`] takes an [`Admitted`]: a stage further on
//! cannot receive an input that skipped the door, so it asks nothing again.
//!
//! # Invariant
//!
//! An [`Admitted`] input's text is not blank and its secrets are masked (a channel's
//! input is also within the text cap and shaped by its channel's definition). Code
//! after the door may set routing fields (level, settle hook, reply), never the text.

use std::ops::{Deref, DerefMut};

use super::input::{Input, Refusal};
use super::inputdef::InputDef;

/// An input that passed the door (see the module docs).
#[derive(Debug)]
pub struct Admitted(Input);

impl Admitted {
    /// The agent's own input — a kernel notice, consolidation, a helper's or resident's
    /// report, a parent's `send` to its resident — written by the kernel or by the model
    /// (which only ever sees aliases): not blank is all it must be.
    pub fn own(input: Input) -> Result<Self, Refusal> {
        if input.text.trim().is_empty() {
            let mut input = input;
            input.reply.skip(Refusal::EmptyInput);
            return Err(Refusal::EmptyInput);
        }
        Ok(Self(input))
    }

    /// An input the inbox stored after it passed the door, run again after a restart
    /// or on the owner's retry: masked again (a row stored before inputs were masked at
    /// the door, or a secret added to the store since), nothing else asked.
    pub fn stored(mut input: Input, gate: Option<&crate::firewall::Firewall>) -> Self {
        mask(gate, &mut input);
        Self(input)
    }

    /// The input, leaving the door's type (to store or to hand to another agent's door).
    pub fn into_inner(self) -> Input {
        self.0
    }
}

impl Deref for Admitted {
    type Target = Input;
    fn deref(&self) -> &Input {
        &self.0
    }
}

impl DerefMut for Admitted {
    /// For the routing fields (level, settle hook, reply): see the module's invariant.
    fn deref_mut(&mut self) -> &mut Input {
        &mut self.0
    }
}

/// A channel's input at the door: its secrets masked, its channel's definition applied
/// (a cleaner may empty it), then refused when blank or over the text cap (the kernel's
/// own input is not capped). A refusal is answered to a waiting caller here.
pub fn admit(
    mut input: Input,
    gate: Option<&crate::firewall::Firewall>,
    def: Option<&InputDef>,
) -> Result<Admitted, Refusal> {
    mask(gate, &mut input);
    let (no_memory, policy) = InputDef::apply(def, &input.text);
    input.no_memory |= no_memory;
    input.payload.set_policy(policy);
    if let Err(r) = check(&input) {
        tracing::info!(source = %input.source, request = %input.request_id, "input refused: {r}");
        input.reply.skip(r.clone());
        return Err(r);
    }
    Ok(Admitted(input))
}

/// What the door refuses of an input as it stands: a blank text, or (from a channel)
/// a text over `core.input_processing.text.max_bytes`.
fn check(input: &Input) -> Result<(), Refusal> {
    if input.text.trim().is_empty() {
        return Err(Refusal::EmptyInput);
    }
    if input.kernel {
        return Ok(());
    }
    Refusal::check_size(&input.text)
}

/// Replaces the secrets the owner typed (an API key pasted into chat) by their
/// `@{alias}` before the input is stored, published or run: the inbox is a file in the
/// data dir, and a secret's only home is the settings database.
fn mask(gate: Option<&crate::firewall::Firewall>, input: &mut Input) {
    if let Some(fw) = gate
        && let std::borrow::Cow::Owned(masked) = fw.mask(&input.text)
    {
        tracing::info!(source = %input.source, "secrets in an input replaced by their aliases");
        input.text = masked;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn firewall() -> crate::firewall::Firewall {
        let fw = crate::firewall::Firewall::default();
        let mut config = (*fw.config()).clone();
        config.gate = crate::firewall::CredentialGate::new(
            &[("bank".to_owned(), "s3cr3t-pin-8841".to_owned())]
                .into_iter()
                .collect(),
            &Default::default(),
        );
        fw.configure(config);
        fw
    }

    #[test]
    fn a_channel_input_is_masked_shaped_and_checked_once() {
        let fw = firewall();
        let a = admit(Input::text("webui", "my pin is s3cr3t-pin-8841"), Some(&fw), None).unwrap();
        assert_eq!(a.text, "my pin is @{bank}");

        let r = admit(Input::text("webui", "  \n "), Some(&fw), None).unwrap_err();
        assert_eq!(r, Refusal::EmptyInput);

        let limit = crate::config::live::max_text_bytes();
        let r = admit(Input::text("webui", &"x".repeat(limit + 1)), Some(&fw), None).unwrap_err();
        assert!(matches!(r, Refusal::TooLarge { .. }), "{r:?}");
        // The kernel's own input is not capped.
        let mut own = Input::text("kernel", &"x".repeat(limit + 1));
        own.kernel = true;
        assert!(admit(own, Some(&fw), None).is_ok());
    }

    #[test]
    fn the_agents_own_input_must_not_be_blank_and_a_stored_one_is_masked_again() {
        assert_eq!(
            Admitted::own(Input::text("kernel", " ")).unwrap_err(),
            Refusal::EmptyInput
        );
        assert!(Admitted::own(Input::text("kernel", "a helper finished")).is_ok());
        let fw = firewall();
        let a = Admitted::stored(Input::text("webui", "pin s3cr3t-pin-8841"), Some(&fw));
        assert_eq!(a.text, "pin @{bank}");
    }
}
