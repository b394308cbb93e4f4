//! The `toolgate-signature` header of webhook requests.
//!
//! The header is `t=UNIX_SECONDS,v1=HEX`: `HEX` is the lowercase hex
//! HMAC-SHA256, keyed with the channel's secret, of the ASCII decimal `t`, a
//! `.`, and the exact request body. `t` is the time of the attempt, so a
//! receiver refuses replays older than a tolerance ([`SIGNATURE_TOLERANCE`]).
//! A receiver accepts the request when any `v1=` value matches, so a sender
//! rotating keys can send one signature per key; other keys (`v0=`, …) are
//! ignored. The comparison is constant-time.

use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// How far a signature's `t` may be from the receiver's clock, either way.
pub const SIGNATURE_TOLERANCE: Duration = Duration::from_secs(5 * 60);

/// Why a signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// The header is not `t=…,v1=…`.
    #[error("malformed signature header: {0}")]
    Malformed(String),
    /// `t` is further in the past than the tolerance.
    #[error("signature timestamp is {age_secs} s old, more than the tolerance")]
    TooOld {
        /// How old `t` is.
        age_secs: i64,
    },
    /// `t` is further in the future than the tolerance.
    #[error("signature timestamp is {ahead_secs} s in the future, more than the tolerance")]
    TooNew {
        /// How far ahead `t` is.
        ahead_secs: i64,
    },
    /// No `v1` value matches the body and the secret.
    #[error("signature does not match")]
    Mismatch,
}

fn mac(secret: &[u8], t_unix_secs: i64, body: &[u8]) -> HmacSha256 {
    let mut mac = <HmacSha256 as KeyInit>::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(t_unix_secs.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The header value `t=T,v1=HEX` signing `body` at time `t_unix_secs`.
pub fn signature_header(secret: &[u8], t_unix_secs: i64, body: &[u8]) -> String {
    let tag = mac(secret, t_unix_secs, body).finalize().into_bytes();
    format!("t={t_unix_secs},v1={}", hex::encode(tag))
}

/// Checks a `toolgate-signature` header against `body` at `now_unix_secs`.
pub fn verify_signature(
    secret: &[u8],
    header: &str,
    body: &[u8],
    now_unix_secs: i64,
    tolerance: Duration,
) -> Result<(), SignatureError> {
    let (t, candidates) = parse_header(header)?;
    let tolerance = i64::try_from(tolerance.as_secs()).unwrap_or(i64::MAX);
    let age = now_unix_secs.saturating_sub(t);
    if age > tolerance {
        return Err(SignatureError::TooOld { age_secs: age });
    }
    if -age > tolerance {
        return Err(SignatureError::TooNew { ahead_secs: -age });
    }
    let expected = mac(secret, t, body);
    // `verify_slice` compares in constant time; every candidate is checked.
    let matched = candidates.iter().fold(false, |ok, tag| expected.clone().verify_slice(tag).is_ok() | ok);
    if matched { Ok(()) } else { Err(SignatureError::Mismatch) }
}

/// Splits the header into its timestamp and its `v1` tags.
fn parse_header(header: &str) -> Result<(i64, Vec<Vec<u8>>), SignatureError> {
    let malformed = |why: &str| SignatureError::Malformed(why.to_owned());
    let mut t = None;
    let mut tags = Vec::new();
    for part in header.split(',') {
        let (key, value) = part.trim().split_once('=').ok_or_else(|| malformed("a part has no `=`"))?;
        match key.trim() {
            "t" => {
                let value: i64 = value.trim().parse().map_err(|_| malformed("`t` is not an integer"))?;
                if t.replace(value).is_some() {
                    return Err(malformed("`t` appears twice"));
                }
            }
            "v1" => {
                let tag = hex::decode(value.trim()).map_err(|_| malformed("a `v1` value is not hex"))?;
                tags.push(tag);
            }
            _ => {}
        }
    }
    let t = t.ok_or_else(|| malformed("no `t`"))?;
    if tags.is_empty() {
        return Err(malformed("no `v1`"));
    }
    Ok((t, tags))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"whsec_test";
    const BODY: &[u8] = br#"{"id":"evt_1"}"#;
    const NOW: i64 = 1_767_000_000;

    fn verify(header: &str, body: &[u8], now: i64) -> Result<(), SignatureError> {
        verify_signature(SECRET, header, body, now, SIGNATURE_TOLERANCE)
    }

    #[test]
    fn header_has_the_documented_form() {
        let header = signature_header(SECRET, NOW, BODY);
        let (t, v1) = header.split_once(',').unwrap();
        assert_eq!(t, format!("t={NOW}"));
        let hex_tag = v1.strip_prefix("v1=").unwrap();
        assert_eq!(hex_tag.len(), 64);
        assert!(hex_tag.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        // HMAC-SHA256 over "t.body", computed independently.
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(SECRET).unwrap();
        mac.update(format!("{NOW}.").as_bytes());
        mac.update(BODY);
        assert_eq!(hex_tag, hex::encode(mac.finalize().into_bytes()));
    }

    #[test]
    fn round_trip_verifies() {
        let header = signature_header(SECRET, NOW, BODY);
        assert_eq!(verify(&header, BODY, NOW), Ok(()));
        assert_eq!(verify(&header, BODY, NOW + 299), Ok(()));
        assert_eq!(verify(&header, BODY, NOW - 299), Ok(()));
        assert_eq!(verify(&format!(" {} ", header.replace(',', " , ")), BODY, NOW), Ok(()));
    }

    #[test]
    fn tampered_body_and_wrong_secret_are_mismatches() {
        let header = signature_header(SECRET, NOW, BODY);
        assert_eq!(verify(&header, br#"{"id":"evt_2"}"#, NOW), Err(SignatureError::Mismatch));
        let other = signature_header(b"another secret", NOW, BODY);
        assert_eq!(verify(&other, BODY, NOW), Err(SignatureError::Mismatch));
        // The timestamp is signed: moving it breaks the signature.
        let moved = header.replace(&format!("t={NOW}"), &format!("t={}", NOW + 1));
        assert_eq!(verify(&moved, BODY, NOW), Err(SignatureError::Mismatch));
    }

    #[test]
    fn timestamps_outside_the_tolerance_are_refused() {
        let header = signature_header(SECRET, NOW, BODY);
        assert_eq!(verify(&header, BODY, NOW + 301), Err(SignatureError::TooOld { age_secs: 301 }));
        assert_eq!(verify(&header, BODY, NOW - 301), Err(SignatureError::TooNew { ahead_secs: 301 }));
        let short = verify_signature(SECRET, &header, BODY, NOW + 2, Duration::from_secs(1));
        assert_eq!(short, Err(SignatureError::TooOld { age_secs: 2 }));
    }

    #[test]
    fn malformed_headers_are_refused() {
        let tag = signature_header(SECRET, NOW, BODY).split_once(",v1=").unwrap().1.to_owned();
        for header in [
            "".to_owned(),
            "garbage".to_owned(),
            format!("v1={tag}"),
            format!("t={NOW}"),
            format!("t=soon,v1={tag}"),
            format!("t={NOW},v1=zz{tag}"),
            format!("t={NOW},t={NOW},v1={tag}"),
        ] {
            assert!(
                matches!(verify(&header, BODY, NOW), Err(SignatureError::Malformed(_))),
                "{header:?} should be malformed"
            );
        }
    }

    #[test]
    fn any_of_several_v1_values_may_match() {
        let old = signature_header(b"old key", NOW, BODY);
        let new = signature_header(SECRET, NOW, BODY);
        let old_tag = old.split_once(",v1=").unwrap().1;
        let new_tag = new.split_once(",v1=").unwrap().1;
        assert_eq!(verify(&format!("t={NOW},v1={old_tag},v1={new_tag}"), BODY, NOW), Ok(()));
        assert_eq!(verify(&format!("t={NOW},v1={new_tag},v1={old_tag}"), BODY, NOW), Ok(()));
        assert_eq!(verify(&format!("t={NOW},v0=abc,v1={new_tag}"), BODY, NOW), Ok(()));
        assert_eq!(verify(&format!("t={NOW},v1={old_tag},v1={old_tag}"), BODY, NOW), Err(SignatureError::Mismatch));
    }
}
