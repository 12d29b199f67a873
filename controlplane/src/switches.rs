//! `--controllers`: which controllers this replica runs, spelled as kube-controller-manager
//! spells its own flag (`*` for every controller, `name` to turn one on, `-name` to turn it
//! off; `*,-broadcastjob` runs all but BroadcastJob). Every cache is kept either way: a
//! switched-off controller only stops acting.

use std::str::FromStr;

/// Every component `--controllers` can name.
pub const COMPONENTS: &[&str] = &[
    "cloneset",
    "statefulset",
    "daemonset",
    "imagepulljob",
    "imagelistpulljob",
    "broadcastjob",
    "advancedcronjob",
    "podunavailablebudget",
    "containerrecreaterequest",
    "sidecarset",
    "containerlaunchpriority",
    "podprobemarker",
    "imagelist-distributor",
    "csr-signer",
    "podunavailablebudget-webhook",
    "sidecarset-webhook",
    "containerlaunchpriority-webhook",
];

/// The parsed `--controllers` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerSwitches {
    all: bool,
    on: Vec<String>,
    off: Vec<String>,
}

impl Default for ControllerSwitches {
    /// Every controller on.
    fn default() -> Self {
        Self {
            all: true,
            on: Vec::new(),
            off: Vec::new(),
        }
    }
}

impl ControllerSwitches {
    /// Whether `component` runs: off when named with `-`, on when named or when `*` is
    /// given, off otherwise.
    pub fn enabled(&self, component: &str) -> bool {
        if self.off.iter().any(|c| c == component) {
            return false;
        }
        self.all || self.on.iter().any(|c| c == component)
    }
}

impl FromStr for ControllerSwitches {
    type Err = String;

    fn from_str(list: &str) -> Result<Self, Self::Err> {
        let mut switches = Self {
            all: false,
            on: Vec::new(),
            off: Vec::new(),
        };
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if entry == "*" {
                switches.all = true;
                continue;
            }
            let (name, target) = match entry.strip_prefix('-') {
                Some(name) => (name, &mut switches.off),
                None => (entry, &mut switches.on),
            };
            if !COMPONENTS.contains(&name) {
                return Err(format!(
                    "\"{name}\" is not a controller this control plane runs; it runs {}",
                    COMPONENTS.join(", ")
                ));
            }
            target.push(name.to_owned());
        }
        Ok(switches)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_component_runs_as_the_list_says() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "cloneset", true),
            ("*,-cloneset", "cloneset", false),
            ("*,-cloneset", "statefulset", true),
            ("-cloneset,*", "cloneset", false),
            ("statefulset", "statefulset", true),
            ("statefulset", "cloneset", false),
            ("statefulset,-statefulset", "statefulset", false),
            ("", "cloneset", false),
            (" * , -csr-signer ", "csr-signer", false),
            (" * , -csr-signer ", "imagelist-distributor", true),
        ];
        for (list, component, want) in cases {
            let switches: ControllerSwitches = list.parse().unwrap();
            assert_eq!(
                switches.enabled(component),
                *want,
                "--controllers {list:?} for {component}"
            );
        }
    }

    #[test]
    fn the_default_runs_every_component() {
        let switches = ControllerSwitches::default();
        assert!(COMPONENTS.iter().all(|c| switches.enabled(c)));
        assert_eq!("*".parse::<ControllerSwitches>().unwrap(), switches);
    }

    #[test]
    fn an_unknown_name_is_refused_naming_it() {
        for list in ["clonesets", "*,-daemonsett", "cloneset,bogus"] {
            let err = list.parse::<ControllerSwitches>().unwrap_err();
            assert!(err.contains("is not a controller"), "{list}: {err}");
            assert!(err.contains("cloneset, statefulset"), "{list}: {err}");
        }
    }
}
