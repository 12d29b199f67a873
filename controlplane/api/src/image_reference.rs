//! The image-reference grammar as RE2 expressions for CEL rules, mirroring the agent's
//! parser (`agent/src/reference.rs`, the `github.com/distribution/reference` grammar):
//!
//! ```text
//! reference        := name [ ":" tag ] [ "@" digest ]
//! name             := [domain "/"] path-component ["/" path-component]*
//! domain           := domain-component ["." domain-component]* [":" port-number]
//! domain-component := [a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]
//! path-component   := [a-z0-9]+ ((\.|_|__|-+) [a-z0-9]+)*
//! tag              := [\w][\w.-]{0,127}
//! digest           := sha256 ":" 64 lowercase hex | sha512 ":" 128 lowercase hex
//! ```
//!
//! As in the agent (and Docker), the first of several components is the registry when
//! it contains a '.' or ':', is `localhost` or has an uppercase letter; so a first
//! component with a '.' must be a valid domain, never a path component (`my_reg.io/x`
//! is refused). The rules differ from the agent in one place: the agent counts the
//! 255-character name limit after normalisation (`nginx` → `docker.io/library/nginx`),
//! CEL counts it as written, so a name without a registry of 238 to 255 characters
//! passes admission and is refused by the agent, which reports the pull Failed.
//!
//! The pieces are macros so the whole expressions are `&'static str` constants that
//! `x_kube` rules can use. `[.]` stands for a literal dot: a backslash would need
//! escaping twice (Rust, then the CEL string literal).

/// The longest image reference accepted, as written.
pub const REFERENCE_MAX_LENGTH: usize = 512;
/// The longest name (registry and repository path, without tag and digest).
pub const NAME_MAX_LENGTH: usize = 255;

macro_rules! domain_component {
    () => {
        "[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
    };
}

macro_rules! domain {
    () => {
        concat!(
            domain_component!(),
            "(?:[.]",
            domain_component!(),
            ")*(?::[0-9]+)?"
        )
    };
}

macro_rules! path_component {
    () => {
        "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
    };
}

/// A path component without a '.', the only kind that can start a multi-component
/// name without a registry.
macro_rules! path_component_without_dot {
    () => {
        "[a-z0-9]+(?:(?:__?|-+)[a-z0-9]+)*"
    };
}

macro_rules! name {
    () => {
        concat!(
            "(?:",
            domain!(),
            "/",
            path_component!(),
            "(?:/",
            path_component!(),
            ")*|",
            path_component_without_dot!(),
            "(?:/",
            path_component!(),
            ")+|",
            path_component!(),
            ")"
        )
    };
}

macro_rules! reference {
    () => {
        concat!(
            "^",
            name!(),
            "(?::[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?",
            "(?:@(?:sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128}))?$"
        )
    };
}

macro_rules! hex_name {
    () => {
        "^[0-9a-f]{64}(?:[:@]|$)"
    };
}

/// RE2: a whole image reference.
pub const REFERENCE_REGEX: &str = reference!();
/// RE2: the name at the start of a valid reference (for its length).
pub const NAME_PREFIX_REGEX: &str = concat!("^", name!());
/// RE2: a reference whose name is 64 hex characters, which would read as an image ID.
pub const HEX_NAME_REGEX: &str = hex_name!();

/// CEL on a string field (`self`): the reference grammar.
pub const FIELD_GRAMMAR_RULE: &str = concat!("self.matches('", reference!(), "')");
/// CEL on a string field: the name is not 64 hex characters.
pub const FIELD_HEX_NAME_RULE: &str = concat!("!self.matches('", hex_name!(), "')");
/// CEL on a string field: the name is at most 255 characters.
pub const FIELD_NAME_LENGTH_RULE: &str = concat!("size(self.find('^", name!(), "')) <= 255");

/// CEL on a map keyed by references: every key is at most 512 characters.
pub const KEYS_LENGTH_RULE: &str = "self.all(k, size(k) <= 512)";
/// The message of [`KEYS_LENGTH_RULE`], naming (the start of) the key.
pub const KEYS_LENGTH_MESSAGE: &str = "'spec.images: image reference ' + self.filter(k, size(k) > 512)[0].substring(0, 80) + '... is longer than 512 characters'";

/// CEL on a map keyed by references: every key follows the grammar (long keys are left to
/// [`KEYS_LENGTH_RULE`]).
pub const KEYS_GRAMMAR_RULE: &str = concat!(
    "self.all(k, size(k) > 512 || k.matches('",
    reference!(),
    "'))"
);
/// The message of [`KEYS_GRAMMAR_RULE`], naming the first offending key.
pub const KEYS_GRAMMAR_MESSAGE: &str = concat!(
    "'spec.images: ' + self.filter(k, size(k) <= 512 && !k.matches('",
    reference!(),
    "'))[0] + ' is not a valid image reference: expected [registry[:port]/]path[:tag][@sha256:<64 hex>], with a lowercase path'"
);

/// CEL on a map keyed by references: no key's name is 64 hex characters.
pub const KEYS_HEX_NAME_RULE: &str = concat!("self.all(k, !k.matches('", hex_name!(), "'))");
/// The message of [`KEYS_HEX_NAME_RULE`], naming the first offending key.
pub const KEYS_HEX_NAME_MESSAGE: &str = concat!(
    "'spec.images: ' + self.filter(k, k.matches('",
    hex_name!(),
    "'))[0] + ' is not a valid image reference: a 64-character hexadecimal name reads as an image ID'"
);

/// CEL on a map keyed by references: every key's name is at most 255 characters.
pub const KEYS_NAME_LENGTH_RULE: &str =
    concat!("self.all(k, size(k.find('^", name!(), "')) <= 255)");
/// The message of [`KEYS_NAME_LENGTH_RULE`], naming (the start of) the first offending key.
pub const KEYS_NAME_LENGTH_MESSAGE: &str = concat!(
    "'spec.images: image reference ' + self.filter(k, size(k.find('^",
    name!(),
    "')) > 255)[0].substring(0, 80) + '... has a name (registry and path) longer than 255 characters'"
);
