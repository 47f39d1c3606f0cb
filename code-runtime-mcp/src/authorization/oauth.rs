//! What a server's `"oauth"` config says, and how it is read: [`OAuth`] (who we are to the
//! authorization server, what we ask for) from the [`OAuthEntry`] serde reads, each string
//! `${VAR}`-expanded and each combination of keys checked once, so the flow itself never meets
//! a client it cannot use.

use std::fmt;

use code_runtime::json;
use code_runtime_fixtures::{KeyPath, Text};
use rmcp::transport::auth::JwtSigningAlgorithm;
use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::authorization::callback;
use crate::expansion::{Environment, expand};

/// A remote server's `"oauth"`: how we identify ourselves, and what we ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OAuth {
    pub(crate) client: Client,
    /// `scopes`: asked for at the first authorization; when empty, the server's challenge or
    /// metadata chooses (the MCP spec's scope selection).
    pub(crate) scopes: Vec<String>,
    /// `redirectUri`: the loopback address the code comes back to, for a client registered
    /// with a fixed one; else a free port of 127.0.0.1, path `/callback`.
    pub(crate) redirect: Option<callback::Redirect>,
}

/// Who we are to the authorization server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Client {
    /// Registered at the first authorization (dynamic client registration), or, when the
    /// server takes one, named by the URL of a client metadata document (`clientMetadataUrl`).
    Dynamic { metadata_url: Option<String> },
    /// A client registered beforehand (`clientId`, `clientSecret`), authorizing with the code
    /// grant.
    Registered { id: String, secret: Option<Secret> },
    /// The client credentials grant, authenticated by a secret.
    SecretCredentials { id: String, secret: Secret },
    /// The client credentials grant, authenticated by a JWT signed with a private key
    /// (`privateKeyFile`, PEM; `signingAlgorithm`, ES256 unless said).
    KeyCredentials { id: String, key: Secret, algorithm: Algorithm },
}

/// A value no message or debug output shows.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(pub(super) String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<secret>")
    }
}

/// The JWT signing algorithms a client credentials key may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Algorithm {
    Es256,
    Es384,
    Rs256,
    Rs384,
    Rs512,
}

const ALGORITHMS: [(&str, Algorithm); 5] = [
    ("ES256", Algorithm::Es256),
    ("ES384", Algorithm::Es384),
    ("RS256", Algorithm::Rs256),
    ("RS384", Algorithm::Rs384),
    ("RS512", Algorithm::Rs512),
];

impl Algorithm {
    pub(super) fn rmcp(self) -> JwtSigningAlgorithm {
        match self {
            Self::Es256 => JwtSigningAlgorithm::ES256,
            Self::Es384 => JwtSigningAlgorithm::ES384,
            Self::Rs256 => JwtSigningAlgorithm::RS256,
            Self::Rs384 => JwtSigningAlgorithm::RS384,
            Self::Rs512 => JwtSigningAlgorithm::RS512,
        }
    }
}

/// `"oauth"` as a server's config writes it: `true` (register ourselves, ask for what the
/// server says), `false` (none), or an object of [`OAuthFields`].
#[derive(Debug)]
pub(crate) enum OAuthEntry {
    Off,
    On(OAuthFields),
}

/// The keys of an `"oauth"` object, as written (each string expands `${VAR}` when read).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct OAuthFields {
    client_id: Option<Text>,
    client_secret: Option<Text>,
    client_metadata_url: Option<Text>,
    scopes: Option<Scopes>,
    grant: Option<Text>,
    private_key_file: Option<Text>,
    signing_algorithm: Option<Text>,
    redirect_uri: Option<Text>,
}

/// `scopes`: an array of scope names, or one space-separated string.
#[derive(Debug)]
struct Scopes(Vec<String>);

impl<'de> Deserialize<'de> for OAuthEntry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(OAuthVisitor)
    }
}

/// Reads `"oauth"`: a boolean or an object.
struct OAuthVisitor;

impl<'de> Visitor<'de> for OAuthVisitor {
    type Value = OAuthEntry;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("true, false or an object")
    }

    fn visit_bool<E: de::Error>(self, on: bool) -> Result<OAuthEntry, E> {
        Ok(if on { OAuthEntry::On(OAuthFields::default()) } else { OAuthEntry::Off })
    }

    fn visit_map<A: MapAccess<'de>>(self, fields: A) -> Result<OAuthEntry, A::Error> {
        OAuthFields::deserialize(MapAccessDeserializer::new(fields)).map(OAuthEntry::On)
    }
}

impl<'de> Deserialize<'de> for Scopes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ScopesVisitor)
    }
}

/// Reads `scopes`: a string split at whitespace, or an array of single names.
struct ScopesVisitor;

impl<'de> Visitor<'de> for ScopesVisitor {
    type Value = Scopes;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of scope names, or one space-separated string")
    }

    fn visit_str<E: de::Error>(self, scopes: &str) -> Result<Scopes, E> {
        Ok(Scopes(scopes.split_whitespace().map(str::to_owned).collect()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut names: A) -> Result<Scopes, A::Error> {
        let mut scopes = Vec::new();
        while let Some(Text(name)) = names.next_element()? {
            if name.contains(char::is_whitespace) {
                return Err(de::Error::custom("a scope name has no space: give each its own item"));
            }
            scopes.push(name);
        }
        Ok(Scopes(scopes))
    }
}

impl OAuth {
    /// The `"oauth"` of the server at `at` (its key path names it in errors), `None` when
    /// off; `${VAR}` in its strings is taken from `environment`.
    pub(crate) fn from_entry(
        entry: OAuthEntry,
        at: &KeyPath,
        environment: &Environment<'_>,
    ) -> Result<Option<Self>, String> {
        let OAuthEntry::On(fields) = entry else { return Ok(None) };
        let text = |key: &str, value: Option<Text>| -> Result<Option<String>, String> {
            value
                .map(|Text(text)| {
                    expand(&text, environment).map_err(|why| at.key(key).invalid(why))
                })
                .transpose()
        };
        let given = Given {
            id: text("clientId", fields.client_id)?,
            secret: text("clientSecret", fields.client_secret)?.map(Secret),
            key_file: text("privateKeyFile", fields.private_key_file)?,
            algorithm: text("signingAlgorithm", fields.signing_algorithm)?,
            metadata_url: text("clientMetadataUrl", fields.client_metadata_url)?,
            grant: text("grant", fields.grant)?,
        };
        let client = given.client().map_err(|why| at.invalid(why))?;
        let redirect = match text("redirectUri", fields.redirect_uri)? {
            None => None,
            Some(uri) => Some(
                callback::Redirect::parse(&uri)
                    .map_err(|why| at.key("redirectUri").invalid(why))?,
            ),
        };
        let scopes = fields.scopes.map(|Scopes(scopes)| scopes).unwrap_or_default();
        Ok(Some(Self { client, scopes, redirect }))
    }
}

/// Who we are, as `"oauth"`'s keys say it (expanded).
struct Given {
    id: Option<String>,
    secret: Option<Secret>,
    key_file: Option<String>,
    algorithm: Option<String>,
    metadata_url: Option<String>,
    grant: Option<String>,
}

impl Given {
    /// The one client these keys make, or why they make none.
    fn client(self) -> Result<Client, String> {
        let Self { id, secret, key_file, algorithm, metadata_url, grant } = self;
        let algorithm = match algorithm {
            None => None,
            Some(name) => {
                let found = ALGORITHMS.iter().find(|(known, _)| *known == name);
                Some(found.map(|(_, algorithm)| *algorithm).ok_or_else(|| {
                    let known: Vec<&str> = ALGORITHMS.iter().map(|(known, _)| *known).collect();
                    let known = known.join(", ");
                    format!("signingAlgorithm must be one of {known}, got {}", json::quote(&name))
                })?)
            }
        };
        if metadata_url.as_ref().is_some_and(|url| !url.starts_with("https://")) {
            return Err("clientMetadataUrl must be an https:// URL".into());
        }
        match grant.as_deref() {
            None | Some("authorization_code") => {
                if key_file.is_some() || algorithm.is_some() {
                    return Err("privateKeyFile and signingAlgorithm are for \
                                \"grant\": \"client_credentials\""
                        .into());
                }
                match (id, secret) {
                    (Some(id), secret) => Ok(Client::Registered { id, secret }),
                    (None, None) => Ok(Client::Dynamic { metadata_url }),
                    (None, Some(_)) => Err("clientSecret needs clientId".into()),
                }
            }
            Some("client_credentials") => {
                let id = id.ok_or("\"grant\": \"client_credentials\" needs clientId")?;
                match (secret, key_file) {
                    (Some(secret), None) if algorithm.is_none() => {
                        Ok(Client::SecretCredentials { id, secret })
                    }
                    (None, Some(path)) => {
                        let key = std::fs::read_to_string(&path).map_err(|error| {
                            format!("privateKeyFile {}: {error}", json::quote(&path))
                        })?;
                        let algorithm = algorithm.unwrap_or(Algorithm::Es256);
                        Ok(Client::KeyCredentials { id, key: Secret(key), algorithm })
                    }
                    _ => Err("\"grant\": \"client_credentials\" needs exactly one of \
                              clientSecret or privateKeyFile (with signingAlgorithm)"
                        .into()),
                }
            }
            Some(other) => Err(format!(
                "grant must be \"authorization_code\" or \"client_credentials\", got {}",
                json::quote(other)
            )),
        }
    }
}
