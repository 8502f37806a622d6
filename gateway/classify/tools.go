package classify

import "strings"

// verbModels compiles a table of verb → grammar (names are the verbs).
func verbModels(prog string, ms ...model) map[string]*grammar {
	out := map[string]*grammar{}
	for i := range ms {
		g := compile(&ms[i])
		g.name = prog + " " + g.name
		for _, n := range strings.Fields(ms[i].names) {
			out[n] = g
		}
	}
	return out
}

// readVerb reads a tool's verb (docker ps, kubectl get): with none the
// tool prints its help; an option before the verb (what it chooses is
// named by before) is not proved; a read verb is classified by its
// grammar. done reports that the command is classified.
func (c *classifier) readVerb(text, name string, rest []word, verbs map[string]*grammar, before string) (verb string, args []word, done bool) {
	switch {
	case len(rest) == 0:
		c.add(text, ReadOnly, name+" prints its help")
		return "", nil, true
	case !rest[0].lit || strings.HasPrefix(rest[0].v, "-"):
		c.add(text, Destructive, name+" "+rest[0].src+": an option before the verb ("+before+")")
		return "", nil, true
	}
	verb, args = rest[0].v, rest[1:]
	if g := verbs[verb]; g != nil {
		c.check(text, g, args)
		return verb, args, true
	}
	return verb, args, false
}

// containerVerbs are the read verbs of docker, podman and nerdctl with
// their options (docker 28).
var containerVerbs = verbModels("docker",
	model{exact: true, names: "ps", short: "aqsnlf:", long: "all quiet size no-trunc latest last= filter= format= help"},
	model{exact: true, names: "images", short: "aqf:", long: "all quiet digests no-trunc filter= format= tree help"},
	model{exact: true, names: "logs", short: "ft:n:", long: "follow timestamps tail= since= until= details help"},
	model{exact: true, names: "inspect", short: "f:s", long: "format= size type= help"},
	model{exact: true, names: "version info", short: "f:", long: "format= help"},
	model{exact: true, names: "stats", short: "a", long: "all no-stream no-trunc format= help"},
	model{exact: true, names: "top port diff", long: "help"},
	model{exact: true, names: "history", short: "qH", long: "quiet human? no-trunc format= platform= help"},
	model{exact: true, names: "events", short: "f:", long: "filter= format= since= until= help"},
)

// container classifies docker and its kind: the read verbs by their
// grammar; run, exec and create run what the classifier cannot read (with
// host privileges: privileged); rm, kill, prune remove or stop; other
// verbs change containers or images. Options before the verb (-H, the
// configuration, the context) choose another daemon: not proved.
func (c *classifier) container(text, name string, rest []word) {
	verb, args, done := c.readVerb(text, name, rest, containerVerbs, "another daemon or configuration")
	if done {
		return
	}
	switch verb {
	case "rm", "rmi", "kill", "prune", "stop", "down":
		c.add(text, Destructive, name+" "+verb+" removes or stops")
	case "run", "exec", "create":
		if anyArg(args, "--privileged", "--pid=host", "--net=host", "--network=host", "--userns=host") || anyPrefix(args, "-v/:", "--volume=/:", "/:") {
			c.add(text, Privileged, name+" "+verb+" with host privileges")
		} else {
			c.add(text, Destructive, name+" "+verb+" runs a command the classifier cannot read")
		}
	case "compose", "system", "volume", "network", "image", "container", "builder", "cp", "build", "pull", "push", "tag",
		"start", "restart", "pause", "unpause", "rename", "update", "commit", "save", "load", "import", "export", "login", "logout":
		if anyArg(args, "prune", "rm", "remove", "down", "kill") {
			c.add(text, Destructive, name+" "+verb+" removes")
		} else {
			c.add(text, Mutating, name+" "+verb+" changes containers or images")
		}
	default:
		c.add(text, Destructive, name+" "+verb+" is not a verb the classifier knows")
	}
}

// kubectlVerbs are kubectl's read verbs with their options. Options that
// choose another configuration, server or identity (--kubeconfig,
// --server, --token, --as) are not among them.
var kubectlVerbs = verbModels("kubectl",
	model{exact: true, names: "get", short: "n:Ao:l:wL:f:Rk:", long: "namespace= all-namespaces output= selector= watch watch-only field-selector= show-labels sort-by= no-headers label-columns= ignore-not-found show-kind chunk-size= template= allow-missing-template-keys? raw= request-timeout= v= subresource= server-print? show-managed-fields output-watch-events filename= recursive? kustomize= help", effects: "f,filename,k,kustomize:read"},
	model{exact: true, names: "describe", short: "n:Al:f:R", long: "namespace= all-namespaces selector= show-events? chunk-size= filename= recursive? request-timeout= v= help", effects: "f,filename:read"},
	model{exact: true, names: "logs", short: "n:c:fpl:", long: "namespace= container= follow previous selector= tail= since= since-time= timestamps all-containers? prefix? limit-bytes= max-log-requests= pod-running-timeout= ignore-errors request-timeout= v= help"},
	model{exact: true, names: "top", short: "n:Al:", long: "namespace= all-namespaces selector= containers no-headers sort-by= use-protocol-buffers? sum? request-timeout= v= help"},
	model{exact: true, names: "version api-resources api-versions explain", short: "o:", long: "client? output= short? namespaced? api-group= verbs= sort-by= no-headers recursive? api-version= output-format= request-timeout= v= help"},
)

// kubectl classifies kubectl and oc: the read verbs by their grammar;
// delete, drain, exec and their kind remove or reach inside; any other
// verb changes the cluster.
func (c *classifier) kubectl(text, name string, rest []word) {
	verb, _, done := c.readVerb(text, name, rest, kubectlVerbs, "another configuration, server or identity")
	if done {
		return
	}
	switch verb {
	case "delete", "drain", "replace", "exec", "cp", "debug", "attach", "port-forward", "proxy", "run":
		c.add(text, Destructive, name+" "+verb+" removes, replaces or reaches inside")
	default:
		c.add(text, Mutating, name+" "+verb+" changes the cluster")
	}
}

// packageReads are the package managers' verbs that show, with the
// options that only choose what is shown; any other option (apt's -o
// sets configuration that can name programs to run) is not proved.
var packageReads = map[string]map[string]string{
	"apt":     {"list": "--installed --upgradable --all-versions -a --manual-installed", "show": "-a --all-versions", "search": "--names-only --full", "policy": ""},
	"apt-get": {},
	"dnf":     {"list": "--installed --available --upgrades", "info": "", "search": "", "repolist": "--all --enabled --disabled"},
	"yum":     {"list": "installed available updates", "info": "", "search": "", "repolist": "all enabled disabled"},
	"pip":     {"list": "--outdated -o --uptodate -u --not-required --user -l --local --format=json --format=columns --format=freeze", "show": "-f --files -v --verbose", "freeze": "--all -l --local --user"},
	"npm":     {"ls": "--all --json --long -g --global --prod --dev --depth=0 --depth=1", "list": "--all --json --long -g --global --depth=0 --depth=1", "view": "--json", "outdated": "--json -g --global"},
	"gem":     {"list": "--local -l"},
	"snap":    {"list": "--all", "info": ""},
	"brew":    {"list": "--versions", "info": ""},
	"zypper":  {"search": "", "info": ""},
	"apk":     {"info": "-v -a -L", "search": "-v"},
}

// packages classifies a package manager by its verb: the verbs that show
// read; remove and its kind remove packages; any other installs or
// changes them.
func (c *classifier) packages(text, name string, rest []word) {
	reads := packageReads[strings.TrimSuffix(name, "3")]
	if len(rest) == 0 || rest[0].lit && (rest[0].v == "--version" || rest[0].v == "help" || rest[0].v == "--help") && len(rest) == 1 {
		c.add(text, ReadOnly, name+" prints its help or version")
		return
	}
	verb := rest[0]
	if allowed, ok := reads[verb.v]; ok && verb.lit {
		for _, a := range rest[1:] {
			if !a.lit && !a.safe || a.lit && strings.HasPrefix(a.v, "-") && !strings.Contains(" "+allowed+" ", " "+a.v+" ") {
				c.add(text, Destructive, name+" "+verb.v+" "+a.src+" is not an option the classifier knows")
				return
			}
		}
		c.add(text, ReadOnly, name+" "+verb.v+" shows")
		return
	}
	switch verb.v {
	case "remove", "purge", "autoremove", "uninstall", "erase", "del", "rm", "autoclean", "clean":
		c.add(text, Destructive, name+" "+verb.v+" removes packages")
	default:
		c.add(text, Mutating, name+" "+verb.src+" installs or changes packages (or is not a verb the classifier knows)")
	}
}
