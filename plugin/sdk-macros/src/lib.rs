//! `#[policy]` on a policy's `impl Policy for …` block: the hooks the
//! policy implements are named from the methods written in the block, so a
//! hook is declared once (by writing it) and never forgotten in the
//! metadata. A block that writes neither `type Settings` nor `configure`
//! gets the SDK's `NoSettings` and a `configure` that accepts them. Read
//! with the compiler's own token trees: the attribute needs only the
//! block's item names, not a full Rust parser.

use proc_macro::{Delimiter, Group, TokenStream, TokenTree};

/// Method names of the `Policy` trait and the hook each one implements.
const HOOK_METHODS: &[(&str, &str)] = &[
    ("queue_order", "QueueOrder"),
    ("pre_filter", "PreFilter"),
    ("filter", "Filter"),
    ("filter_node", "Filter"),
    ("score", "Score"),
    ("score_node", "Score"),
    ("permit", "Permit"),
    ("scale", "Scale"),
];

/// Adds `const HOOKS` to an `impl Policy for T` block, listing the hooks
/// whose methods the block defines, in the interface's order.
#[proc_macro_attribute]
pub fn policy(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return error("#[policy] takes no arguments");
    }
    let mut tokens: Vec<TokenTree> = item.into_iter().collect();
    let Some(body_at) = tokens
        .iter()
        .rposition(|t| matches!(t, TokenTree::Group(g) if g.delimiter() == Delimiter::Brace))
    else {
        return error("#[policy] goes on an `impl Policy for …` block");
    };
    let TokenTree::Group(body) = &tokens[body_at] else {
        unreachable!("found as a group above")
    };
    let defined = method_names(body.stream());
    let names_settings = names_type(body.stream(), "Settings");
    let mut hooks: Vec<&str> = Vec::new();
    for (method, hook) in HOOK_METHODS {
        if defined.iter().any(|d| d == method) && !hooks.contains(hook) {
            hooks.push(hook);
        }
    }
    let list: Vec<String> = hooks
        .iter()
        .map(|h| format!("::dragon_policy_sdk::types::Hook::{h}"))
        .collect();
    let mut items = format!(
        "const HOOKS: &'static [::dragon_policy_sdk::types::Hook] = &[{}];",
        list.join(", ")
    );
    // A policy that writes neither its settings type nor `configure` takes
    // no settings; one that writes only one of them gets the compiler's
    // error for the other.
    if !names_settings && !defined.iter().any(|d| d == "configure") {
        items.push_str(
            "type Settings = ::dragon_policy_sdk::NoSettings; \
             fn configure(&mut self, _: ::dragon_policy_sdk::NoSettings) \
             -> ::core::result::Result<(), ::dragon_policy_sdk::Refusal> { ::core::result::Result::Ok(()) }",
        );
    }
    let constant: TokenStream = items.parse().expect("well-formed items");
    let mut stream = body.stream();
    stream.extend(constant);
    let mut group = Group::new(Delimiter::Brace, stream);
    group.set_span(body.span());
    tokens[body_at] = TokenTree::Group(group);
    tokens.into_iter().collect()
}

/// Whether the block defines the associated type `name` (`type name = …`).
fn names_type(body: TokenStream, name: &str) -> bool {
    let mut after_type = false;
    for t in body {
        match t {
            TokenTree::Ident(i) if after_type => {
                if i.to_string() == name {
                    return true;
                }
                after_type = false;
            }
            TokenTree::Ident(i) => after_type = i.to_string() == "type",
            _ => after_type = false,
        }
    }
    false
}

/// The names after each `fn` at the top level of an impl block.
fn method_names(body: TokenStream) -> Vec<String> {
    let mut names = Vec::new();
    let mut after_fn = false;
    for t in body {
        match t {
            TokenTree::Ident(i) if after_fn => {
                names.push(i.to_string());
                after_fn = false;
            }
            TokenTree::Ident(i) => after_fn = i.to_string() == "fn",
            _ => after_fn = false,
        }
    }
    names
}

fn error(message: &str) -> TokenStream {
    format!("::core::compile_error!({message:?});")
        .parse()
        .expect("a well-formed error")
}
