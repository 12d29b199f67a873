//! Every end-to-end and component suite of the cluster, one module each, in one test
//! binary: one link and one copy of the generic code they share instead of one per suite,
//! which was most of the test build (docs/architecture.md, "Running the tests").
//! `tests/lib/suites.sh` runs each suite (top-level module) in a process of its own, as
//! its own binary ran before; a suite that must not overlap others says so with a
//! `//! Runs alone: <why>` line at the top of its file. One suite by hand:
//! `cargo test -p stevedore-tests --test e2e -- <suite>::`.

// Helpers the suites share.
mod advancedcronjob_support;
mod agent_process;
mod cloneset_component;
mod cloneset_support;
mod crd_versions_support;
mod daemonset_support;
mod imagelist_support;
mod kubectl_plugin_support;

// The suites.
mod advancedcronjob;
mod advancedcronjob_faults;
mod agent_bearer_auth;
mod agent_certificates;
mod agent_credentials;
mod agent_daemonset;
mod agent_images;
mod agent_kill_mid_pull;
mod agent_node;
mod broadcastjob;
mod chaos_short;
mod cloneset_agents;
mod cloneset_inplace;
mod cloneset_inplace_env;
mod cloneset_leader;
mod cloneset_lifecycle;
mod cloneset_predownload;
mod cloneset_resize;
mod cloneset_rollout;
mod cloneset_safety;
mod cloneset_scale;
mod cluster_script;
mod containerrecreaterequest;
mod controlplane_deploy;
mod controlplane_fencing;
mod controlplane_leader;
mod crd_advancedcronjob;
mod crd_bounds;
mod crd_cloneset;
mod crd_imagelist;
mod crd_statefulset;
mod crd_versions_defaults;
mod csi_storage;
mod daemonset;
mod daemonset_faults;
mod helm_chart;
mod helm_release;
mod huge_replicas;
mod imagelist_distribution;
mod imagelist_events;
mod imagelist_events_leader;
mod imagelist_faults;
mod imagelistpulljob;
mod imagepulljob;
mod kubectl_plugin;
mod kubectl_plugin_changes;
mod launch_priority;
mod least_privilege;
mod owned_label_selectors;
mod pod_set_selector_guard;
mod poddisruptionbudget;
mod podprobemarker;
mod podunavailablebudget;
mod poison_object;
mod real_nodes_agents;
mod real_nodes_join;
mod real_nodes_predownload;
mod real_nodes_workloads;
mod reference_grammar;
mod seed_jobs;
mod sidecarset;
mod sidecarset_hot_upgrade;
mod smoke;
mod statefulset_basic;
mod statefulset_e2e;
mod statefulset_faults;
mod statefulset_predownload;
mod statefulset_scale_down;
mod statefulset_volume_resize;
mod webhook_auth;
