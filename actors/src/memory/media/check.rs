//! Checking an image before anything is stored: the bytes decide, never the caller.
//!
//! An attachment's declared MIME type is a claim; the kind is sniffed from the magic
//! bytes (PNG, JPEG, GIF, WebP — what every bundled vision format accepts), the
//! dimensions are read from the header (`imagesize`, no pixel decoding), and the size
//! is held against `core.input_processing.image.max_bytes`. Every refusal says which
//! limit or rule it met and what to do, and it happens before any write, so a refused
//! message leaves nothing behind (no event, no block).

use base64::Engine as _;

/// Longest side accepted, in pixels: vendors scale larger images down anyway, and a
/// header claiming more is a decompression bomb or a damaged file.
pub const MAX_SIDE: u64 = 16_384;

/// The limits an attachment is checked against (from settings, read per request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest decoded size of one image (`core.input_processing.image.max_bytes`).
    pub max_bytes: usize,
    /// Most images in one message (`core.input_processing.image.max_count`).
    pub max_count: usize,
}

/// A checked image: its sniffed type, its dimensions and its bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Image {
    pub mime: &'static str,
    pub width: u32,
    pub height: u32,
    pub data: Vec<u8>,
}

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Image({} {}x{}, {} bytes)",
            self.mime,
            self.width,
            self.height,
            self.data.len()
        )
    }
}

impl Image {
    /// The block id this image has in memory (content-derived, see [`super::block_id`]).
    pub fn block_id(&self) -> String {
        super::block_id(self.mime, &self.data)
    }
}

/// Why an attachment was refused. `index` counts from 0 in the order sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MediaError {
    #[error(
        "attachment {index}: `data` is not valid base64 ({reason}); send the file's bytes base64-encoded (a `data:<mime>;base64,` prefix is accepted)"
    )]
    Base64 { index: usize, reason: String },
    #[error("attachment {index}: `data` is empty; send the image's bytes")]
    Empty { index: usize },
    #[error(
        "attachment {index}: declared `{declared}`, which is not an image type; only images are accepted (PNG, JPEG, GIF, WebP)"
    )]
    DeclaredNotImage { index: usize, declared: String },
    #[error(
        "attachment {index}: the bytes are not a PNG, JPEG, GIF or WebP image ({what}); convert it to one of these"
    )]
    NotImage { index: usize, what: String },
    #[error(
        "attachment {index}: {size} bytes is over the limit of {limit} bytes (core.input_processing.image.max_bytes); send a smaller image or raise the setting"
    )]
    TooLarge { index: usize, size: usize, limit: usize },
    #[error("attachment {index}: the {mime} header cannot be read ({reason}); the file is damaged or truncated")]
    Undecodable {
        index: usize,
        mime: &'static str,
        reason: String,
    },
    #[error("attachment {index}: {width}x{height} pixels is over {MAX_SIDE} on a side; scale it down")]
    TooManyPixels { index: usize, width: u64, height: u64 },
    #[error(
        "{count} attachments, the limit is {limit} per message (core.input_processing.image.max_count); send them in several messages"
    )]
    TooMany { count: usize, limit: usize },
}

/// The image kind of `data` by its magic bytes, or `None`.
pub fn sniff(data: &[u8]) -> Option<&'static str> {
    if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if data.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if data.starts_with(b"GIF87a") || data.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if data.len() >= 12 && &data[..4] == b"RIFF" && &data[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// What the first bytes look like, for the refusal ("text", or their hex).
fn describe(data: &[u8]) -> String {
    let head = &data[..data.len().min(8)];
    if std::str::from_utf8(&data[..data.len().min(256)]).is_ok_and(|t| !t.contains('\0')) {
        "it looks like text".to_owned()
    } else {
        let hex: Vec<String> = head.iter().map(|b| format!("{b:02x}")).collect();
        format!("first bytes {}", hex.join(" "))
    }
}

/// Decodes an attachment's base64 (standard alphabet, padding optional, an optional
/// `data:...;base64,` prefix, whitespace ignored). The decoded size is checked against
/// `limit` from the encoded length first, so an oversized one is never decoded.
pub fn decode_base64(index: usize, text: &str, limit: usize) -> Result<Vec<u8>, MediaError> {
    let body = match text.trim_start().strip_prefix("data:") {
        Some(rest) => rest.split_once(',').map_or("", |(_, b)| b),
        None => text,
    };
    let clean: String = body.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    if clean.is_empty() {
        return Err(MediaError::Empty { index });
    }
    let estimate = clean.trim_end_matches('=').len() * 3 / 4;
    if estimate > limit {
        return Err(MediaError::TooLarge {
            index,
            size: estimate,
            limit,
        });
    }
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    engine.decode(clean.as_bytes()).map_err(|e| MediaError::Base64 {
        index,
        reason: e.to_string(),
    })
}

/// Checks one attachment's bytes: kind, size, header. `declared` is the caller's MIME
/// claim: a non-image claim is refused; an image claim that the bytes contradict is
/// overruled by the sniffed kind (logged), since the bytes are what the vendor gets.
pub fn check(index: usize, declared: Option<&str>, data: Vec<u8>, limits: &Limits) -> Result<Image, MediaError> {
    if let Some(d) = declared.map(str::trim).filter(|d| !d.is_empty())
        && !d.to_ascii_lowercase().starts_with("image/")
    {
        return Err(MediaError::DeclaredNotImage {
            index,
            declared: d.chars().take(80).collect(),
        });
    }
    if data.is_empty() {
        return Err(MediaError::Empty { index });
    }
    if data.len() > limits.max_bytes {
        return Err(MediaError::TooLarge {
            index,
            size: data.len(),
            limit: limits.max_bytes,
        });
    }
    let Some(mime) = sniff(&data) else {
        return Err(MediaError::NotImage {
            index,
            what: describe(&data),
        });
    };
    if let Some(d) = declared
        .map(str::trim)
        .filter(|d| !d.is_empty() && !d.eq_ignore_ascii_case(mime))
    {
        tracing::debug!(
            index,
            declared = d,
            sniffed = mime,
            "attachment type taken from its bytes"
        );
    }
    let size = imagesize::blob_size(&data).map_err(|e| MediaError::Undecodable {
        index,
        mime,
        reason: e.to_string(),
    })?;
    let (w, h) = (size.width as u64, size.height as u64);
    if w == 0 || h == 0 {
        return Err(MediaError::Undecodable {
            index,
            mime,
            reason: "zero width or height".into(),
        });
    }
    if w > MAX_SIDE || h > MAX_SIDE {
        return Err(MediaError::TooManyPixels {
            index,
            width: w,
            height: h,
        });
    }
    Ok(Image {
        mime,
        width: w as u32,
        height: h as u32,
        data,
    })
}

/// One attachment as it arrives: a declared type and base64 data.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Attachment {
    /// The declared MIME type (`image/png`...); the bytes decide the real one.
    #[serde(default)]
    pub mime: Option<String>,
    /// The bytes, base64 (a `data:` URL is accepted too).
    pub data: String,
}

/// Checks every attachment of one message, all before any is stored: the first bad
/// one refuses the whole message.
pub fn check_all(attachments: &[Attachment], limits: &Limits) -> Result<Vec<Image>, MediaError> {
    if attachments.len() > limits.max_count {
        return Err(MediaError::TooMany {
            count: attachments.len(),
            limit: limits.max_count,
        });
    }
    attachments
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let data = decode_base64(i, &a.data, limits.max_bytes)?;
            check(i, a.mime.as_deref(), data, limits)
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A real 2x3 PNG (RGB, red), so the tests need no encoder.
    pub fn png_2x3() -> Vec<u8> {
        let b64 =
            "iVBORw0KGgoAAAANSUhEUgAAAAIAAAADCAIAAAA2iEnWAAAAEElEQVR4nGM4IScHRAwoFABEDQYZFCZhYwAAAABJRU5ErkJggg==";
        base64::engine::general_purpose::STANDARD.decode(b64).unwrap()
    }

    const LIMITS: Limits = Limits {
        max_bytes: 1 << 20,
        max_count: 4,
    };

    #[test]
    fn png_is_sniffed_and_measured() {
        let img = check(0, Some("image/png"), png_2x3(), &LIMITS).unwrap();
        assert_eq!((img.mime, img.width, img.height), ("image/png", 2, 3));
        assert!(img.block_id().starts_with("blk_media_"));
        assert_eq!(img.block_id().len(), "blk_media_".len() + 12);
    }

    #[test]
    fn the_bytes_decide_the_kind() {
        // Declared JPEG, bytes PNG: taken as PNG.
        let img = check(0, Some("image/jpeg"), png_2x3(), &LIMITS).unwrap();
        assert_eq!(img.mime, "image/png");
        assert_eq!(sniff(b"GIF89a\x01\x00"), Some("image/gif"));
        assert_eq!(sniff(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff(&[0xFF, 0xD8, 0xFF, 0xE0]), Some("image/jpeg"));
    }

    #[test]
    fn text_posing_as_an_image_is_refused_with_what_it_is() {
        let e = check(1, Some("image/png"), b"hello, I am text".to_vec(), &LIMITS).unwrap_err();
        assert!(matches!(e, MediaError::NotImage { index: 1, .. }), "{e}");
        assert!(e.to_string().contains("looks like text"), "{e}");
        let e = check(0, Some("text/plain"), png_2x3(), &LIMITS).unwrap_err();
        assert!(matches!(e, MediaError::DeclaredNotImage { .. }), "{e}");
    }

    #[test]
    fn oversized_images_name_the_limit_and_are_not_decoded() {
        let small = Limits {
            max_bytes: 10,
            max_count: 4,
        };
        let e = check(0, None, png_2x3(), &small).unwrap_err();
        assert!(e.to_string().contains("core.input_processing.image.max_bytes"), "{e}");
        // From the encoded length alone: 4 MB of base64 is refused before decoding.
        let huge = "A".repeat(4 << 20);
        assert!(matches!(
            decode_base64(0, &huge, 1 << 20),
            Err(MediaError::TooLarge { .. })
        ));
    }

    #[test]
    fn truncated_headers_and_bad_base64_are_refused() {
        let mut png = png_2x3();
        png.truncate(12);
        let e = check(0, None, png, &LIMITS).unwrap_err();
        assert!(matches!(e, MediaError::Undecodable { .. }), "{e}");
        assert!(matches!(
            decode_base64(0, "@@@not base64@@@", 1000),
            Err(MediaError::Base64 { .. })
        ));
        let url = format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(png_2x3())
        );
        assert_eq!(decode_base64(0, &url, 1000).unwrap(), png_2x3());
    }

    #[test]
    fn a_message_is_checked_whole_before_anything_is_kept() {
        let good = Attachment {
            mime: Some("image/png".into()),
            data: base64::engine::general_purpose::STANDARD.encode(png_2x3()),
        };
        let bad = Attachment {
            mime: None,
            data: base64::engine::general_purpose::STANDARD.encode(b"plain text"),
        };
        assert_eq!(check_all(std::slice::from_ref(&good), &LIMITS).unwrap().len(), 1);
        let e = check_all(&[good.clone(), bad], &LIMITS).unwrap_err();
        assert!(matches!(e, MediaError::NotImage { index: 1, .. }));
        let e = check_all(&vec![good; 5], &LIMITS).unwrap_err();
        assert!(matches!(e, MediaError::TooMany { count: 5, limit: 4 }));
    }
}
