//! Who receives an e-mail channel's message about one event.
//!
//! An e-mail channel's `to` names recipients indirectly: the approval's
//! current approvers, principals, groups or literal addresses.
//! [`Email::recipients`] resolves them for one event: groups through the
//! server's groups, principals through `[emails]` (a principal that itself
//! contains `@` is its own address). The result is deduplicated by address
//! (ignoring case), in the order of `to` and, within an entry, of its members;
//! principals without an address are returned in [`Recipients::unmapped`] so
//! the caller can report them.

use std::collections::{BTreeMap, HashSet};

use crate::config::{Email, EmailTarget};

/// The resolved recipients of one event on one e-mail channel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recipients {
    /// One entry per distinct address.
    pub to: Vec<Recipient>,
    /// Principals without an address in `[emails]`, and unknown groups as
    /// `group:NAME`, each once.
    pub unmapped: Vec<String>,
}

/// One e-mail recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipient {
    /// The principal the address belongs to; `None` for a literal address in `to`.
    pub principal: Option<String>,
    /// The e-mail address.
    pub address: String,
}

impl Email {
    /// Resolves `to` for one event: `approvers` are the principals who
    /// currently decide, `groups` maps group names to principals and `emails`
    /// principals to addresses.
    pub fn recipients(
        &self,
        approvers: &[String],
        groups: &BTreeMap<String, Vec<String>>,
        emails: &BTreeMap<String, String>,
    ) -> Recipients {
        let mut resolver = Resolver { emails, seen: HashSet::new(), out: Recipients::default() };
        for target in &self.to {
            match target {
                EmailTarget::Approvers => approvers.iter().for_each(|p| resolver.principal(p)),
                EmailTarget::Principal(principal) => resolver.principal(principal),
                EmailTarget::Group(name) => match groups.get(name) {
                    Some(members) => members.iter().for_each(|p| resolver.principal(p)),
                    None => resolver.unmapped(format!("group:{name}")),
                },
                EmailTarget::Address(address) => resolver.add(None, address),
            }
        }
        resolver.out
    }
}

struct Resolver<'a> {
    emails: &'a BTreeMap<String, String>,
    seen: HashSet<String>,
    out: Recipients,
}

impl Resolver<'_> {
    fn principal(&mut self, principal: &str) {
        if let Some(address) = self.emails.get(principal) {
            self.add(Some(principal), &address.clone());
        } else if principal.contains('@') {
            self.add(Some(principal), principal);
        } else {
            self.unmapped(principal.to_owned());
        }
    }

    fn add(&mut self, principal: Option<&str>, address: &str) {
        if self.seen.insert(address.to_lowercase()) {
            self.out.to.push(Recipient { principal: principal.map(str::to_owned), address: address.to_owned() });
        }
    }

    fn unmapped(&mut self, name: String) {
        if !self.out.unmapped.contains(&name) {
            self.out.unmapped.push(name);
        }
    }
}
