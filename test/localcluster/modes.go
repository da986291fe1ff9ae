package main

import "context"

// step is one thing up does, named for the error that stops it.
type step struct {
	name string
	run  func(context.Context) error
}

// stage is a point of up's sequence at which a mode adds steps.
type stage int

const (
	// hostSetup comes before etcd: what the host needs first.
	hostSetup stage = iota
	// podAdmission comes once the CRDs are served and before any node
	// registers: what decides on pods must be there before the first.
	podAdmission
	// nodeStart comes before kwok's nodes.
	nodeStart
	// workloads comes once the controllers run, so that objects made then
	// pass their webhooks.
	workloads
)

// A mode is an optional part of the local cluster, beyond its base
// (control plane, kwok's nodes, JobSet, Kueue and a TrainJob controller):
// whether it is on, what it adds to up at each stage, and the processes it
// runs.
type mode interface {
	// on: asked for by up's flags, or found in the state of the cluster
	// since (for status and down).
	on() bool
	steps(stage) []step
	// components maps each name of startOrder the mode owns to the
	// processes it runs by that name (one per node for a per-node part).
	components() map[string][]string
}

// modes are every optional part, in the order their steps run at a stage.
func (c *cluster) modes() []mode { return []mode{realNodes{c}, openShift{c}, metricsServer{c}} }

// stepsAt are the steps the modes that are on add at a stage.
func (c *cluster) stepsAt(s stage) []step {
	var out []step
	for _, m := range c.modes() {
		if m.on() {
			out = append(out, m.steps(s)...)
		}
	}
	return out
}

// realNodes are kubelets and containerd on the host (-real-node, root),
// on which pods really run, with CoreDNS for their pods and kube-router
// enforcing NetworkPolicies on each.
type realNodes struct{ c *cluster }

func (m realNodes) on() bool { return m.c.hasRealNode() }

func (m realNodes) steps(s stage) []step {
	c := m.c
	switch s {
	case hostSetup:
		return []step{{"the real nodes' network", c.prepareRealNodes}}
	case nodeStart:
		return []step{{"real nodes", c.startRealNodes}}
	case workloads:
		// Created through the Trainer API, so after the CRDs are served
		// (and validated by the operator's webhook when it runs).
		return []step{
			{"runtimes for the real nodes", c.installLocalRuntimes},
			{"the real nodes' secondary network", c.installLocalNetwork},
			{"the real nodes' storage", c.installLocalStorage},
		}
	}
	return nil
}

func (m realNodes) components() map[string][]string {
	out := map[string][]string{"coredns": {"coredns"}}
	for _, name := range []string{"containerd", "kubelet", "kube-router"} {
		out[name] = []string{}
		for _, n := range m.c.realNodeList() {
			out[name] = append(out[name], n.component(name))
		}
	}
	return out
}

// openShift is OpenShift's pod security (-openshift): SCCs, namespace UID
// ranges, and OpenShift's SCC admission deciding every pod.
type openShift struct{ c *cluster }

func (m openShift) on() bool { return m.c.runsOpenShift() }

func (m openShift) steps(s stage) []step {
	if s == podAdmission {
		return []step{{"OpenShift's SCC admission", m.c.startSCCAdmission}}
	}
	return nil
}

func (m openShift) components() map[string][]string {
	return map[string][]string{"openshift-scc": {"openshift-scc"}}
}

// plan is what up does, in order.
func (c *cluster) plan() []step {
	steps := c.stepsAt(hostSetup)
	steps = append(steps,
		step{"etcd", c.startEtcd},
		step{"kube-apiserver", c.startAPIServer},
		step{"controller-manager and scheduler", c.startControllers},
		step{"CRDs", c.installCRDs})
	steps = append(steps, c.stepsAt(podAdmission)...)
	steps = append(steps, c.stepsAt(nodeStart)...)
	steps = append(steps,
		step{"kwok and nodes", c.startKwok},
		step{"JobSet", c.startJobSet},
		step{"Kueue", c.startKueue})
	switch {
	case c.upstream:
		steps = append(steps, step{"upstream Trainer", c.startUpstreamTrainer})
	case c.operator != "":
		steps = append(steps, step{"Torus operator", c.startOperator})
	}
	return append(steps, c.stepsAt(workloads)...)
}

// expected lists the processes this cluster runs, in start order.
func (c *cluster) expected() []string {
	var out []string
	for _, name := range startOrder {
		// A cluster started with -operator "" runs no operator, one
		// with -upstream-trainer upstream's controller instead.
		if name == "torus-operator" && !c.runsOperator() {
			continue
		}
		if name == upstreamTrainer && !c.runsUpstream() {
			continue
		}
		owned := false
		for _, m := range c.modes() {
			if procs, ok := m.components()[name]; ok {
				owned = true
				if m.on() {
					out = append(out, procs...)
				}
			}
		}
		if !owned {
			out = append(out, name)
		}
	}
	return out
}
