//! # mote-formula
//!
//! One source for every pointwise formula of the meshless solver (fluxes, wave speeds, primitive
//! recovery with floors, admissibility, Riemann solvers, limiter functions): a formula file is
//! written once in the *formula dialect* (below) and compiled twice,
//!
//! - [`host!`] emits its functions as plain Rust for the CPU: the device-only attributes
//!   `#[unroll]` and `#[comptime]` removed and every function `#[inline(always)]`, so that a
//!   hot loop inlines the formula and the CPU's lane loops vectorise it;
//! - [`device!`] emits the same functions as CubeCL `#[cube]` functions for the GPU crate.
//!
//! Both take the file's path relative to the calling crate's manifest directory. The file is
//! not a module of any crate (it lives outside `src/`); the caller's module supplies the names
//! the dialect uses (`Float`, `Array`, `select`, `is_nan`, `finite`): the CPU's from
//! `mote_cloud::formula::prelude`, the device's from CubeCL's prelude and the GPU crate's
//! helpers. See `docs/decisions/0019-single-source-formulas.md`.
//!
//! ## The dialect
//! The intersection of Rust and CubeCL's `#[cube]` language that both sides compile to the same
//! operations:
//! - functions generic over `F: Float`; constants as `F::new(0.5)`; `F::sqrt`, `F::min`,
//!   `F::max`, `F::abs`; arithmetic operators;
//! - state vectors as `&Array<F>` / `&mut Array<F>` parameters indexed by integers; no local
//!   arrays (scratch space comes in as a parameter);
//! - compile-time sizes as `#[comptime] dim: usize` parameters, loops over them marked
//!   `#[unroll]`, decisions on them as `if comptime![strategy == EPD2]` (the plain
//!   expression on the host);
//! - integer constants as `pub const NAME: Type = value;` items (no attributes added);
//! - results as return values (values of `F`, masks, tuples of them) or written into `&mut`
//!   arrays;
//! - comparisons as `lt(a, b)`, `le`, `gt`, `ge`, `ne`, their results of type `Mask<F>`
//!   (`bool` on the device, one per lane on the CPU) combined by `and(a, b)`, `or(a, b)` and
//!   `!` (both sides evaluated: no branch) and used by `select(m, a, b)`;
//! - `is_nan::<F>(x)` and `finite::<F>(x)`: the device tests the bits (its compilers may
//!   assume finite arithmetic), the CPU asks the float.

use proc_macro::{Delimiter, Group, Span, TokenStream, TokenTree};

/// Emits the formula file at the given path (relative to the calling crate's manifest
/// directory) as host functions: `#[unroll]` and `#[comptime]` removed, each function
/// `#[inline(always)]`.
#[proc_macro]
pub fn host(input: TokenStream) -> TokenStream {
    emit(input, Target::Host)
}

/// Emits the formula file at the given path (relative to the calling crate's manifest
/// directory) as CubeCL `#[cube]` functions (CubeCL's `cube` attribute must be in scope).
#[proc_macro]
pub fn device(input: TokenStream) -> TokenStream {
    emit(input, Target::Device)
}

#[derive(Clone, Copy, PartialEq)]
enum Target {
    Host,
    Device,
}

fn emit(input: TokenStream, target: Target) -> TokenStream {
    let (path, span) = match literal_path(input) {
        Ok(found) => found,
        Err(message) => return error(&message, Span::call_site()),
    };
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let file = std::path::Path::new(&dir).join(&path);
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) => return error(&format!("cannot read {}: {e}", file.display()), span),
    };
    let tokens: TokenStream = match text.parse() {
        Ok(tokens) => tokens,
        Err(e) => return error(&format!("{} does not parse: {e}", file.display()), span),
    };
    let tokens = match target {
        Target::Host => tokens,
        Target::Device => mask_to_bool(tokens),
    };
    let mut out = items(tokens, target);
    // Rebuild the calling crate when the formula file changes.
    let track: TokenStream = format!(
        "const _: &str = include_str!({:?});",
        file.to_string_lossy()
    )
    .parse()
    .expect("a constant");
    out.extend(track);
    out
}

/// The string literal argument, unquoted.
fn literal_path(input: TokenStream) -> Result<(String, Span), String> {
    let mut it = input.into_iter();
    match (it.next(), it.next()) {
        (Some(TokenTree::Literal(lit)), None) => {
            let s = lit.to_string();
            if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') {
                Ok((s[1..s.len() - 1].to_string(), lit.span()))
            } else {
                Err("expected a string literal: the formula file's path".into())
            }
        }
        _ => Err("expected one string literal: the formula file's path".into()),
    }
}

fn error(message: &str, span: Span) -> TokenStream {
    let mut ts: TokenStream = format!("compile_error!({message:?});")
        .parse()
        .expect("an error");
    ts = ts
        .into_iter()
        .map(|mut t| {
            t.set_span(span);
            t
        })
        .collect();
    ts
}

/// The file's top level: inner attributes (`//!` docs) dropped (they are the file's own
/// documentation, not the caller's module's), the item attributes of the target put in front of
/// every function, the bodies transformed by [`body`].
fn items(tokens: TokenStream, target: Target) -> TokenStream {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out: Vec<TokenTree> = Vec::new();
    let mut i = 0;
    // Whether the tokens since the last item began a new item's prefix (attributes, `pub`).
    let mut in_prefix = false;
    while i < tokens.len() {
        let t = &tokens[i];
        // `#!` [..]: an inner attribute.
        if is_punct(t, '#')
            && tokens.get(i + 1).is_some_and(|t| is_punct(t, '!'))
            && tokens.get(i + 2).is_some_and(is_bracket)
        {
            i += 3;
            continue;
        }
        if !in_prefix && (is_punct(t, '#') || is_ident(t, "pub") || is_ident(t, "fn")) {
            // The start of an item: a function's attributes first (constants take none).
            if is_function(&tokens[i..]) {
                out.extend(item_attributes(target));
            }
            in_prefix = true;
        }
        if is_ident(t, "fn") || is_ident(t, "const") {
            in_prefix = false;
        }
        match t {
            TokenTree::Group(g) if !in_prefix => out.push(transform_group(g, target)),
            TokenTree::Group(g) if g.delimiter() == Delimiter::Parenthesis => {
                out.push(transform_group(g, target))
            }
            _ => out.push(t.clone()),
        }
        i += 1;
    }
    out.into_iter().collect()
}

/// Whether the item starting at `tokens[0]` (attributes, visibility, then its keyword) is a
/// function.
fn is_function(tokens: &[TokenTree]) -> bool {
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        if is_punct(t, '#') && tokens.get(i + 1).is_some_and(is_bracket) {
            i += 2;
        } else if is_ident(t, "pub") {
            i += 1;
            // `pub(crate)`.
            if tokens.get(i).is_some_and(
                |t| matches!(t, TokenTree::Group(g) if g.delimiter() == Delimiter::Parenthesis),
            ) {
                i += 1;
            }
        } else {
            return is_ident(t, "fn");
        }
    }
    false
}

fn item_attributes(target: Target) -> TokenStream {
    let text = match target {
        Target::Host => "#[inline(always)] #[allow(clippy::too_many_arguments)]",
        Target::Device => "#[cube] #[allow(clippy::too_many_arguments)]",
    };
    text.parse().expect("attributes")
}

/// A group with the device-only attributes removed inside it (host) or kept (device).
fn transform_group(g: &Group, target: Target) -> TokenTree {
    let inner = body(g.stream(), target);
    let mut group = Group::new(g.delimiter(), inner);
    group.set_span(g.span());
    TokenTree::Group(group)
}

/// Removes `#[unroll]` and `#[comptime]` (with any arguments) and unwraps `comptime![..]` for
/// the host, recursively.
fn body(tokens: TokenStream, target: Target) -> TokenStream {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out: Vec<TokenTree> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        if target == Target::Host
            && is_punct(t, '#')
            && tokens.get(i + 1).is_some_and(is_device_attribute)
        {
            i += 2;
            continue;
        }
        // `comptime![e]`: `e` (an invisible group: its precedence kept) on the host, where every
        // value is a run-time one.
        if target == Target::Host
            && is_ident(t, "comptime")
            && tokens.get(i + 1).is_some_and(|t| is_punct(t, '!'))
            && tokens.get(i + 2).is_some_and(is_bracket)
        {
            if let TokenTree::Group(g) = &tokens[i + 2] {
                let mut group = Group::new(Delimiter::None, body(g.stream(), target));
                group.set_span(g.span());
                out.push(TokenTree::Group(group));
            }
            i += 3;
            continue;
        }
        match t {
            TokenTree::Group(g) => out.push(transform_group(g, target)),
            _ => out.push(t.clone()),
        }
        i += 1;
    }
    out.into_iter().collect()
}

/// `Mask<F>` (a comparison's result: one `bool` per lane on the CPU) is `bool` on the device.
fn mask_to_bool(tokens: TokenStream) -> TokenStream {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out: Vec<TokenTree> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        let is_mask = is_ident(t, "Mask")
            && tokens.get(i + 1).is_some_and(|t| is_punct(t, '<'))
            && tokens
                .get(i + 2)
                .is_some_and(|t| matches!(t, TokenTree::Ident(_)))
            && tokens.get(i + 3).is_some_and(|t| is_punct(t, '>'));
        if is_mask {
            let mut b = proc_macro::Ident::new("bool", Span::call_site());
            b.set_span(t.span());
            out.push(TokenTree::Ident(b));
            i += 4;
            continue;
        }
        match t {
            TokenTree::Group(g) => {
                let mut group = Group::new(g.delimiter(), mask_to_bool(g.stream()));
                group.set_span(g.span());
                out.push(TokenTree::Group(group));
            }
            _ => out.push(t.clone()),
        }
        i += 1;
    }
    out.into_iter().collect()
}

fn is_device_attribute(t: &TokenTree) -> bool {
    match t {
        TokenTree::Group(g) if g.delimiter() == Delimiter::Bracket => {
            let first = g.stream().into_iter().next();
            first.is_some_and(|f| is_ident(&f, "unroll") || is_ident(&f, "comptime"))
        }
        _ => false,
    }
}

fn is_punct(t: &TokenTree, c: char) -> bool {
    matches!(t, TokenTree::Punct(p) if p.as_char() == c)
}

fn is_ident(t: &TokenTree, name: &str) -> bool {
    matches!(t, TokenTree::Ident(i) if *i.to_string() == *name)
}

fn is_bracket(t: &TokenTree) -> bool {
    matches!(t, TokenTree::Group(g) if g.delimiter() == Delimiter::Bracket)
}
