//! config: where a log on object storage lives (`s3://BUCKET/PREFIX`) and
//! how to reach it (endpoint, region, credentials), read from the command
//! line and the usual AWS environment variables (spec/storage.md "Naming").

use super::sigv4::Credentials;

/// Longest `s3://` location accepted (bytes).
pub const MAX_LOCATION_BYTES: usize = 1024;
/// Longest prefix accepted (bytes): keys under it must stay within S3's 1,024.
pub const MAX_PREFIX_BYTES: usize = 512;
/// Longest endpoint URL accepted (bytes).
pub const MAX_ENDPOINT_BYTES: usize = 2048;
/// Region used when neither `AWS_REGION` nor `AWS_DEFAULT_REGION` is set.
pub const DEFAULT_REGION: &str = "us-east-1";

/// Environment variables read, in order of precedence where several name one thing.
pub const ENV_ACCESS_KEY_ID: &str = "AWS_ACCESS_KEY_ID";
/// The secret access key.
pub const ENV_SECRET_ACCESS_KEY: &str = "AWS_SECRET_ACCESS_KEY";
/// A temporary credential's session token (optional).
pub const ENV_SESSION_TOKEN: &str = "AWS_SESSION_TOKEN";
/// The region (SigV4 credential scope).
pub const ENV_REGION: &str = "AWS_REGION";
/// The region, as older AWS tools name it (used when `AWS_REGION` is unset).
pub const ENV_DEFAULT_REGION: &str = "AWS_DEFAULT_REGION";
/// The endpoint, when `--endpoint` is not given (the AWS SDKs' S3-specific name).
pub const ENV_ENDPOINT_S3: &str = "AWS_ENDPOINT_URL_S3";
/// The endpoint, when neither `--endpoint` nor `AWS_ENDPOINT_URL_S3` is given.
pub const ENV_ENDPOINT: &str = "AWS_ENDPOINT_URL";

/// Why a location or its settings were refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The location is not `s3://BUCKET[/PREFIX]` with a valid bucket and prefix.
    #[error(
        "{location:?} is not a usable object-storage location: {detail} (expected s3://BUCKET/PREFIX)"
    )]
    Location {
        /// The text given (cut at [`MAX_LOCATION_BYTES`]).
        location: String,
        /// What is wrong.
        detail: &'static str,
    },
    /// The endpoint is not an absolute `http://HOST[:PORT]` URL.
    #[error("endpoint {endpoint:?}: {detail}")]
    Endpoint {
        /// The text given.
        endpoint: String,
        /// What is wrong.
        detail: &'static str,
    },
    /// No endpoint was given.
    #[error(
        "no object-storage endpoint: pass --endpoint http://HOST:PORT or set {ENV_ENDPOINT_S3} or {ENV_ENDPOINT}"
    )]
    NoEndpoint,
    /// A credential variable is missing or empty.
    #[error(
        "{name} is not set: object storage needs {ENV_ACCESS_KEY_ID} and {ENV_SECRET_ACCESS_KEY}"
    )]
    MissingCredential {
        /// The variable.
        name: &'static str,
    },
}

/// A bucket and a key prefix: `s3://BUCKET/PREFIX`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The bucket name.
    pub bucket: String,
    /// The prefix of every key of the log, without leading or trailing `/`;
    /// empty for a log at the bucket's root.
    pub prefix: String,
}

impl Location {
    /// Parses `s3://BUCKET[/PREFIX][/]`.
    ///
    /// The bucket follows S3's naming rules (3 to 63 of `a-z 0-9 . -`,
    /// starting and ending with a letter or digit). The prefix is segments
    /// separated by single `/`, each of S3's "safe" characters
    /// `A-Z a-z 0-9 ! - _ . * ' ( )` and none `.` or `..`: a prefix
    /// that needs no escaping anywhere (URLs, shells, CDNs).
    pub fn parse(text: &str) -> Result<Location, ConfigError> {
        let bad = |detail: &'static str| ConfigError::Location {
            location: text.chars().take(MAX_LOCATION_BYTES).collect(),
            detail,
        };
        if text.len() > MAX_LOCATION_BYTES {
            return Err(bad("too long"));
        }
        let rest = text
            .strip_prefix("s3://")
            .ok_or_else(|| bad("it does not start with s3://"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let prefix = prefix.strip_suffix('/').unwrap_or(prefix);
        if !valid_bucket(bucket) {
            return Err(bad(
                "the bucket name must be 3 to 63 of a-z 0-9 . - and start and end with a letter or digit",
            ));
        }
        if prefix.len() > MAX_PREFIX_BYTES {
            return Err(bad("the prefix is too long"));
        }
        if !prefix.is_empty() && !prefix.split('/').all(valid_segment) {
            return Err(bad(
                "each prefix segment must be non-empty, not . or .., and of A-Z a-z 0-9 ! - _ . * ' ( )",
            ));
        }
        Ok(Location {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
        })
    }

    /// The key of `name` (a path relative to the log, like `tile/0/000`).
    pub fn key(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", self.prefix)
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.prefix)
    }
}

fn valid_bucket(b: &str) -> bool {
    let bytes = b.as_bytes();
    let edge_ok = |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    (3..=63).contains(&bytes.len())
        && edge_ok(bytes.first())
        && edge_ok(bytes.last())
        && bytes
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'.' || *c == b'-')
        && !b.contains("..")
}

fn valid_segment(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.bytes().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, b'!' | b'-' | b'_' | b'.' | b'*' | b'\'' | b'(' | b')')
        })
}

/// An `http://HOST[:PORT]` endpoint (no path, no query).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `HOST[:PORT]`, sent as the `Host` header and signed.
    pub authority: String,
}

impl Endpoint {
    /// Parses `http://HOST[:PORT][/]`. `https` is refused: this build
    /// carries no TLS stack (spec/storage.md "Transport").
    pub fn parse(text: &str) -> Result<Endpoint, ConfigError> {
        let bad = |detail: &'static str| ConfigError::Endpoint {
            endpoint: text.chars().take(MAX_ENDPOINT_BYTES).collect(),
            detail,
        };
        if text.len() > MAX_ENDPOINT_BYTES {
            return Err(bad("too long"));
        }
        if text.starts_with("https://") {
            return Err(bad(
                "https is not supported by this build (no TLS stack): use an http endpoint on a trusted network or a local TLS-terminating proxy",
            ));
        }
        let rest = text
            .strip_prefix("http://")
            .ok_or_else(|| bad("expected http://HOST[:PORT]"))?;
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        let ok = !authority.is_empty()
            && authority.bytes().all(|c| {
                c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b':' | b'[' | b']')
            });
        if !ok {
            return Err(bad(
                "expected http://HOST[:PORT] with no path, query or user",
            ));
        }
        Ok(Endpoint {
            authority: authority.to_string(),
        })
    }

    /// `http://HOST[:PORT]`.
    pub fn url(&self) -> String {
        format!("http://{}", self.authority)
    }
}

/// Everything needed to talk to one bucket.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where requests go.
    pub endpoint: Endpoint,
    /// SigV4 region.
    pub region: String,
    /// SigV4 credentials.
    pub credentials: Credentials,
}

impl Settings {
    /// Settings from `--endpoint` (if given) and the environment, read
    /// through `var` (so tests need not touch the process environment).
    pub fn from_env_with(
        endpoint: Option<&str>,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Settings, ConfigError> {
        let non_empty = |name: &str| var(name).filter(|v| !v.is_empty());
        let endpoint = match endpoint {
            Some(e) => e.to_string(),
            None => non_empty(ENV_ENDPOINT_S3)
                .or_else(|| non_empty(ENV_ENDPOINT))
                .ok_or(ConfigError::NoEndpoint)?,
        };
        let endpoint = Endpoint::parse(&endpoint)?;
        let required =
            |name: &'static str| non_empty(name).ok_or(ConfigError::MissingCredential { name });
        let credentials = Credentials {
            access_key_id: required(ENV_ACCESS_KEY_ID)?,
            secret_access_key: required(ENV_SECRET_ACCESS_KEY)?,
            session_token: non_empty(ENV_SESSION_TOKEN),
        };
        let region = non_empty(ENV_REGION)
            .or_else(|| non_empty(ENV_DEFAULT_REGION))
            .unwrap_or_else(|| DEFAULT_REGION.to_string());
        Ok(Settings {
            endpoint,
            region,
            credentials,
        })
    }

    /// Settings from `--endpoint` (if given) and the process environment.
    pub fn from_env(endpoint: Option<&str>) -> Result<Settings, ConfigError> {
        Self::from_env_with(endpoint, |name| std::env::var(name).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse_with_and_without_prefix() {
        let l = Location::parse("s3://my-bucket/logs/prod").unwrap();
        assert_eq!(
            (l.bucket.as_str(), l.prefix.as_str()),
            ("my-bucket", "logs/prod")
        );
        assert_eq!(l.key("checkpoint"), "logs/prod/checkpoint");
        let root = Location::parse("s3://my.bucket/").unwrap();
        assert_eq!(root.prefix, "");
        assert_eq!(root.key("tile/0/000"), "tile/0/000");
        let trailing = Location::parse("s3://b12/p/").unwrap();
        assert_eq!(trailing.prefix, "p");
    }

    #[test]
    fn bad_locations_are_refused_with_a_reason() {
        for bad in [
            "my-bucket/logs",
            "s3://",
            "s3://ab",
            "s3://Upper/x",
            "s3://-bucket/x",
            "s3://a..b/x",
            "s3://bucket//x",
            "s3://bucket/a/../b",
            "s3://bucket/a/./b",
            "s3://bucket/sp ace",
            "s3://bucket/q?x",
            "s3://bucket/new\nline",
        ] {
            assert!(
                matches!(Location::parse(bad), Err(ConfigError::Location { .. })),
                "{bad:?} was accepted"
            );
        }
        let long = format!("s3://bucket/{}", "a".repeat(MAX_PREFIX_BYTES + 1));
        assert!(Location::parse(&long).is_err());
    }

    #[test]
    fn endpoints_are_plain_http_authorities() {
        let e = Endpoint::parse("http://127.0.0.1:40480/").unwrap();
        assert_eq!(e.authority, "127.0.0.1:40480");
        assert_eq!(e.url(), "http://127.0.0.1:40480");
        for bad in [
            "https://s3.amazonaws.com",
            "ftp://x",
            "http://",
            "http://h/path",
            "http://u@h",
            "http://h?q",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn settings_come_from_the_environment_with_precedence() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let full: &'static [(&str, &str)] = &[
            (ENV_ACCESS_KEY_ID, "AK"),
            (ENV_SECRET_ACCESS_KEY, "SK"),
            (ENV_ENDPOINT, "http://h:1"),
            (ENV_ENDPOINT_S3, "http://s3:2"),
            (ENV_DEFAULT_REGION, "eu-west-1"),
        ];
        let s = Settings::from_env_with(None, env(full)).unwrap();
        assert_eq!(s.endpoint.authority, "s3:2");
        assert_eq!(s.region, "eu-west-1");
        let s = Settings::from_env_with(Some("http://flag:3"), env(full)).unwrap();
        assert_eq!(s.endpoint.authority, "flag:3");
        let no_secret: &'static [(&str, &str)] =
            &[(ENV_ACCESS_KEY_ID, "AK"), (ENV_SECRET_ACCESS_KEY, "")];
        assert_eq!(
            Settings::from_env_with(Some("http://h:1"), env(no_secret)).err(),
            Some(ConfigError::MissingCredential {
                name: ENV_SECRET_ACCESS_KEY
            })
        );
        assert_eq!(
            Settings::from_env_with(None, env(no_secret)).err(),
            Some(ConfigError::NoEndpoint)
        );
        let minimal: &'static [(&str, &str)] =
            &[(ENV_ACCESS_KEY_ID, "AK"), (ENV_SECRET_ACCESS_KEY, "SK")];
        let s = Settings::from_env_with(Some("http://h:1"), env(minimal)).unwrap();
        assert_eq!(s.region, DEFAULT_REGION);
    }
}
