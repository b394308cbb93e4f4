//! How the page signs people in: [`OidcConfig`], from the `--oidc-*` flags
//! and `--public-url`. Plain settings; [`super::OidcSignIn::discover`]
//! checks them.

/// The scopes asked for unless configured otherwise (`--oidc-scopes`).
pub const DEFAULT_SCOPES: &str = "openid profile email groups";

/// How the page signs people in (the `--oidc-*` flags and `--public-url`).
#[derive(Clone)]
pub struct OidcConfig {
    /// The provider's issuer URL (https, or http on a loopback host).
    pub issuer: String,
    /// This server's client id at the provider.
    pub client_id: String,
    /// The client secret, for a confidential client.
    pub client_secret: Option<String>,
    /// The scopes asked for (`openid` is always among them).
    pub scopes: Vec<String>,
    /// Where people reach this server: the callback is `PUBLIC_URL/auth/callback`.
    pub public_url: String,
    /// The ID token claim naming the principal.
    pub principal_claim: String,
    /// The ID token claim listing the principal's groups (an array of strings).
    pub groups_claim: String,
}

impl std::fmt::Debug for OidcConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcConfig")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "(set)"))
            .field("scopes", &self.scopes)
            .field("public_url", &self.public_url)
            .field("principal_claim", &self.principal_claim)
            .field("groups_claim", &self.groups_claim)
            .finish()
    }
}

impl OidcConfig {
    /// Sign-in at `issuer` as `client_id`, for a server reached at `public_url`,
    /// with the default scopes and claims (`sub`, `groups`) and no client secret.
    pub fn new(issuer: impl Into<String>, client_id: impl Into<String>, public_url: impl Into<String>) -> Self {
        Self {
            issuer: issuer.into(),
            client_id: client_id.into(),
            client_secret: None,
            scopes: DEFAULT_SCOPES.split_whitespace().map(str::to_owned).collect(),
            public_url: public_url.into(),
            principal_claim: "sub".to_owned(),
            groups_claim: "groups".to_owned(),
        }
    }
}
