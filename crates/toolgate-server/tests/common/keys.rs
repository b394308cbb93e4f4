//! Signing keys for the JWT tests, made by `openssl genpkey`, and tokens signed with them.

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

/// The issuer the tests' servers expect.
pub const ISSUER: &str = "https://idp.toolgate.test/realms/main";
/// The audience the tests' servers expect.
pub const AUDIENCE: &str = "toolgate";

/// A private key made by `openssl genpkey`, as jsonwebtoken signs with it, and its public JWK.
pub struct Key {
    pub kid: String,
    pub algorithm: Algorithm,
    pub encoding: EncodingKey,
    pub jwk: Jwk,
    pub public_pem: Vec<u8>,
}

fn openssl(args: &[&str]) -> Vec<u8> {
    let output = Command::new("openssl").args(args).output().expect("openssl runs (the Debian package `openssl`)");
    assert!(output.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    output.stdout
}

pub fn generate(dir: &Path, kid: &str, algorithm: Algorithm) -> Key {
    let path = dir.join(format!("{kid}.pem"));
    let path_text = path.to_str().unwrap();
    let generate: &[&str] = match algorithm {
        Algorithm::RS256 => &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
        Algorithm::ES256 => &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
        Algorithm::EdDSA => &["-algorithm", "ed25519"],
        other => panic!("no key for {other:?}"),
    };
    openssl(&[&["genpkey", "-out", path_text], generate].concat());
    let pem = std::fs::read(&path).unwrap();
    let encoding = match algorithm {
        Algorithm::RS256 => EncodingKey::from_rsa_pem(&pem),
        Algorithm::ES256 => EncodingKey::from_ec_pem(&pem),
        _ => EncodingKey::from_ed_pem(&pem),
    }
    .unwrap();
    let mut jwk = Jwk::from_encoding_key(&encoding, algorithm).unwrap();
    jwk.common.key_id = Some(kid.to_owned());
    let public_pem = openssl(&["pkey", "-in", path_text, "-pubout"]);
    Key { kid: kid.to_owned(), algorithm, encoding, jwk, public_pem }
}

pub fn now() -> i64 {
    i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()).unwrap()
}

/// Claims valid for the next ten minutes, changed by `edit`.
pub fn claims(edit: impl FnOnce(&mut Value)) -> Value {
    let mut claims = json!({"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "iat": now(), "exp": now() + 600,
        "groups": ["finance"]});
    edit(&mut claims);
    claims
}

pub fn sign(key: &Key, claims: &Value) -> String {
    let mut header = Header::new(key.algorithm);
    header.kid = Some(key.kid.clone());
    jsonwebtoken::encode(&header, claims, &key.encoding).unwrap()
}

pub fn write_jwks(path: &Path, keys: &[&Key]) {
    let set = JwkSet { keys: keys.iter().map(|key| key.jwk.clone()).collect() };
    std::fs::write(path, serde_json::to_vec(&set).unwrap()).unwrap();
}
