//! Media memory: images as memory blocks (seed 003, "Media Memory (block union: media
//! *is* a block)").
//!
//! An image is checked at the door ([`check`]), stored as a block of `memory.db` whose
//! id is derived from its content ([`block_id`]; the same image twice is one block) and
//! whose bytes live in the block's own row ([`store`]), travels in the turn's request
//! as an image part ([`parts`]), and is recalled by its own vector in a multimodal
//! space ([`space`], kept current by [`actor`]) — never by a description of it.
//! [`tools`] adds `media_digests` to the memory tools that commit.

pub mod actor;
pub mod check;
pub mod parts;
pub mod space;
pub mod store;
pub mod tools;

use sha2::{Digest, Sha256};

/// Every media block id starts with this.
pub const ID_PREFIX: &str = "blk_media_";

/// The block id of an image: `blk_media_<sha256(trim(mime) + "\0" + data)[:12]>`.
/// Content-derived, so storing the same image again meets its block (`ON CONFLICT`).
pub fn block_id(mime: &str, data: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(mime.trim().as_bytes());
    h.update([0u8]);
    h.update(data);
    let d = h.finalize();
    let hex: String = d.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("{ID_PREFIX}{hex}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn block_ids_follow_the_seed_formula() {
        // sha256("image/png\0abc") starts with these 12 hex digits.
        let id = super::block_id(" image/png ", b"abc");
        let mut input = b"image/png\0".to_vec();
        input.extend_from_slice(b"abc");
        use sha2::Digest;
        let full = sha2::Sha256::digest(&input);
        let hex: String = full.iter().take(6).map(|b| format!("{b:02x}")).collect();
        assert_eq!(id, format!("blk_media_{hex}"));
        assert_ne!(
            id,
            super::block_id("image/jpeg", b"abc"),
            "the type is part of the identity"
        );
    }
}
