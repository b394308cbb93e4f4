//! The signed cookies of OpenID Connect sign-in: the session and the pending sign-ins.
//!
//! A value is `BASE64URL(JSON) "." BASE64URL(HMAC-SHA256(key, "cookie\0" BASE64URL(JSON)))`:
//! readable by whoever holds it, but not changeable without the server's key.
//! A value whose MAC does not verify, that is not the JSON expected, or
//! whose expiry has passed counts as no cookie.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::HeaderMap;
use http::header::COOKIE;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;
use toolgate::ledger::Millis;

use crate::secret::hmac_sha256;

/// The name of the session cookie.
pub const SESSION_COOKIE: &str = "toolgate_session";
/// The name of the cookie holding the pending sign-ins (cleared once none is left).
pub const LOGIN_COOKIE: &str = "toolgate_login";
/// The most sign-ins pending at once in one browser (the oldest is dropped).
pub(super) const MAX_PENDING: usize = 3;
/// The largest cookie value set (browsers drop cookies over about 4 KiB).
pub(super) const MAX_COOKIE_BYTES: usize = 3800;
/// The largest cookie value read.
const MAX_READ_BYTES: usize = 8 * 1024;

/// Signs and opens the values of one kind of cookie.
pub(super) struct CookieKey {
    key: [u8; 32],
}

impl CookieKey {
    /// A signer with this key.
    pub(super) fn new(key: [u8; 32]) -> Self {
        Self { key }
    }

    /// The key (for deriving values bound to it).
    pub(super) fn key(&self) -> &[u8] {
        &self.key
    }

    fn mac(&self, payload: &str) -> [u8; 32] {
        hmac_sha256(&self.key, &[b"cookie\0", payload.as_bytes()])
    }

    /// The signed value of `value`.
    pub(super) fn seal<T: Serialize + ?Sized>(&self, value: &T) -> String {
        // Serializing plain structs of strings and numbers to JSON cannot fail.
        let json = serde_json::to_vec(value).unwrap_or_default();
        let payload = URL_SAFE_NO_PAD.encode(json);
        let mac = URL_SAFE_NO_PAD.encode(self.mac(&payload));
        format!("{payload}.{mac}")
    }

    /// The value `sealed` holds, when its MAC verifies and it is a `T`.
    pub(super) fn open<T: DeserializeOwned>(&self, sealed: &str) -> Option<T> {
        if sealed.len() > MAX_READ_BYTES {
            return None;
        }
        let (payload, mac) = sealed.split_once('.')?;
        let mac = URL_SAFE_NO_PAD.decode(mac).ok()?;
        if !bool::from(self.mac(payload).as_slice().ct_eq(&mac)) {
            return None;
        }
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()
    }
}

/// A signed-in person, as the session cookie holds them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Session {
    /// The principal.
    #[serde(rename = "p")]
    pub principal: String,
    /// The groups the ID token named.
    #[serde(rename = "g")]
    pub groups: Vec<String>,
    /// When the session ends (milliseconds since the Unix epoch).
    #[serde(rename = "exp")]
    pub expires: Millis,
    /// The session's random id, which signing out revokes (a cookie without
    /// one is refused: it could not be revoked).
    #[serde(rename = "sid", default)]
    pub id: String,
}

/// A sign-in under way: its `state`, the path to return to, and when it expires.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Pending {
    /// The `state` sent to the provider.
    #[serde(rename = "s")]
    pub state: String,
    /// The path first asked for.
    #[serde(rename = "to")]
    pub to: String,
    /// When the sign-in expires (milliseconds since the Unix epoch).
    #[serde(rename = "exp")]
    pub expires: Millis,
}

/// Why a request has no session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionRefusal {
    /// No session cookie.
    #[error("no session: sign in on the page")]
    Missing,
    /// A session cookie whose time is up.
    #[error("the session has expired: sign in again on the page")]
    Expired,
    /// A session cookie that was tampered with or signed with another secret.
    #[error("the session cookie is not valid (changed, or signed by another server): sign in again on the page")]
    Invalid,
    /// A session that was signed out (see `revoked.rs`).
    #[error("the session was signed out: sign in again on the page")]
    Revoked,
}

/// The values of the cookies named `name`, in every `Cookie` header of the request.
pub(super) fn values<'h>(headers: &'h HeaderMap, name: &'h str) -> impl Iterator<Item = &'h str> + 'h {
    headers.get_all(COOKIE).iter().filter_map(|value| value.to_str().ok()).flat_map(|line| line.split(';')).filter_map(
        move |pair| {
            let (key, value) = pair.trim().split_once('=')?;
            (key.trim() == name).then(|| value.trim().trim_matches('"'))
        },
    )
}

/// The session of the request at `now`: the first session cookie that verifies and has not expired.
pub(super) fn session(key: &CookieKey, headers: &HeaderMap, now: Millis) -> Result<Session, SessionRefusal> {
    let mut refusal = SessionRefusal::Missing;
    for value in values(headers, SESSION_COOKIE) {
        match key.open::<Session>(value) {
            Some(session) if now < session.expires && !session.id.is_empty() => return Ok(session),
            Some(session) if session.id.is_empty() => refusal = SessionRefusal::Invalid,
            Some(_) => refusal = SessionRefusal::Expired,
            None if refusal == SessionRefusal::Missing => refusal = SessionRefusal::Invalid,
            None => {}
        }
    }
    Err(refusal)
}

/// The request's pending sign-ins that have not expired at `now`.
pub(super) fn pending(key: &CookieKey, headers: &HeaderMap, now: Millis) -> Vec<Pending> {
    let mut logins: Vec<Pending> =
        values(headers, LOGIN_COOKIE).find_map(|value| key.open::<Vec<Pending>>(value)).unwrap_or_default();
    logins.retain(|login| now < login.expires);
    logins
}

/// A `Set-Cookie` value: `HttpOnly`, `SameSite=Lax`, this path, `Max-Age`, and `Secure` when asked.
pub(super) fn set(name: &str, value: &str, path: &str, max_age_seconds: i64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{name}={value}; Path={path}; Max-Age={}; HttpOnly; SameSite=Lax{secure}", max_age_seconds.max(0))
}

/// A `Set-Cookie` value that removes the cookie.
pub(super) fn clear(name: &str, path: &str, secure: bool) -> String {
    set(name, "", path, 0, secure)
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn with_cookies(lines: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for line in lines {
            headers.append(COOKIE, HeaderValue::from_str(line).unwrap());
        }
        headers
    }

    fn alice(expires: Millis) -> Session {
        Session { principal: "alice".into(), groups: vec!["finance".into()], expires, id: "sid-1".into() }
    }

    #[test]
    fn a_sealed_session_opens_until_it_expires() {
        let key = CookieKey::new([7; 32]);
        let sealed = key.seal(&alice(2_000));
        let headers = with_cookies(&[&format!("theme=dark; {SESSION_COOKIE}={sealed}")]);
        assert_eq!(session(&key, &headers, 1_999), Ok(alice(2_000)));
        assert_eq!(session(&key, &headers, 2_000), Err(SessionRefusal::Expired));
        assert_eq!(session(&key, &HeaderMap::new(), 0), Err(SessionRefusal::Missing));
        // A session without an id (from before ids) could not be revoked: refused.
        let unrevocable = key.seal(&Session { id: String::new(), ..alice(2_000) });
        let headers = with_cookies(&[&format!("{SESSION_COOKIE}={unrevocable}")]);
        assert_eq!(session(&key, &headers, 0), Err(SessionRefusal::Invalid));
    }

    #[test]
    fn a_changed_or_foreign_cookie_opens_nothing() {
        let key = CookieKey::new([7; 32]);
        let sealed = key.seal(&alice(2_000));
        let (payload, mac) = sealed.split_once('.').unwrap();
        let bob =
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&Session { principal: "bob".into(), ..alice(2_000) }).unwrap());
        for forged in
            [format!("{bob}.{mac}"), format!("{payload}.{}", &mac[1..]), format!("{payload}."), payload.to_owned()]
        {
            let headers = with_cookies(&[&format!("{SESSION_COOKIE}={forged}")]);
            assert_eq!(session(&key, &headers, 0), Err(SessionRefusal::Invalid), "{forged}");
        }
        let other = CookieKey::new([8; 32]);
        let headers = with_cookies(&[&format!("{SESSION_COOKIE}={sealed}")]);
        assert_eq!(session(&other, &headers, 0), Err(SessionRefusal::Invalid));
        // A valid cookie beside a stale one still counts.
        let headers = with_cookies(&[&format!("{SESSION_COOKIE}=junk"), &format!("{SESSION_COOKIE}={sealed}")]);
        assert_eq!(session(&key, &headers, 0), Ok(alice(2_000)));
    }

    #[test]
    fn cookies_are_http_only_and_lax() {
        assert_eq!(set("a", "b", "/", 60, false), "a=b; Path=/; Max-Age=60; HttpOnly; SameSite=Lax");
        assert_eq!(clear("a", "/x/", true), "a=; Path=/x/; Max-Age=0; HttpOnly; SameSite=Lax; Secure");
    }
}
