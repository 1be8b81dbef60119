//! Drops the struct builders (`types::builder::X`, `X::builder()`) of types that are never a
//! request body. With every field optional they add nothing over `X { .., ..Default::default() }`
//! yet were about 60% of each generated module (and of its compile time). The builders of
//! request bodies stay: the operation builders' `body_map` uses them.

use std::collections::BTreeSet;

use anyhow::{Context, Result};
use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use syn::{Item, ItemImpl, ItemMod, Type};

pub fn prune_struct_builders(file: &mut syn::File) -> Result<()> {
    let operations =
        find_mod(&mut file.items, "builder").context("no operation `builder` module")?;
    let mut keep = BTreeSet::new();
    body_builder_names(operations.to_token_stream(), &mut keep);

    let types = find_mod(&mut file.items, "types").context("no `types` module")?;
    let type_items = &mut types.content.as_mut().context("`types` is empty")?.1;
    type_items.retain(|item| match item {
        Item::Impl(imp) => {
            !is_builder_constructor(imp) || self_name(imp).is_some_and(|n| keep.contains(&n))
        }
        _ => true,
    });
    let builders = find_mod(type_items, "builder").context("no `types::builder` module")?;
    builders
        .content
        .as_mut()
        .context("`types::builder` is empty")?
        .1
        .retain(|item| {
            let name = match item {
                Item::Struct(s) => Some(s.ident.to_string()),
                Item::Impl(imp) => self_name(imp),
                _ => None,
            };
            name.is_none_or(|n| keep.contains(&n))
        });
    Ok(())
}

fn find_mod<'a>(items: &'a mut [Item], name: &str) -> Option<&'a mut ItemMod> {
    items.iter_mut().find_map(|item| match item {
        Item::Mod(m) if m.ident == name => Some(m),
        _ => None,
    })
}

/// Collects `X` from every `types::builder::X` path in the tokens.
fn body_builder_names(tokens: TokenStream, names: &mut BTreeSet<String>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, token) in tokens.iter().enumerate() {
        if let TokenTree::Group(group) = token {
            body_builder_names(group.stream(), names);
        }
        let text = |j: usize| tokens.get(j).map(ToString::to_string);
        // `types :: builder :: X`: `::` is two `:` punctuation tokens.
        if text(i).as_deref() == Some("types")
            && text(i + 3).as_deref() == Some("builder")
            && let Some(TokenTree::Ident(name)) = tokens.get(i + 6)
        {
            names.insert(name.to_string());
        }
    }
}

/// `impl X { pub fn builder() -> builder::X { .. } }`
fn is_builder_constructor(imp: &ItemImpl) -> bool {
    imp.trait_.is_none()
        && imp.items.len() == 1
        && matches!(&imp.items[0], syn::ImplItem::Fn(f) if f.sig.ident == "builder")
}

/// The last path segment of the implementing type (`X` for `X` and `super::X`).
fn self_name(imp: &ItemImpl) -> Option<String> {
    match &*imp.self_ty {
        Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}
