package classify

import "strings"

// gitDiffLong are the diff and revision options the read verbs share:
// they choose what is shown and how. --output (writes a file),
// --ext-diff, --textconv, -O and options the classifier does not know
// are not among them.
const gitDiffLong = "oneline max-count= skip= since= after= until= before= author= committer= grep= all branches? tags? remotes? " +
	"graph decorate? no-decorate format= pretty? stat? shortstat numstat name-only name-status patch no-patch follow " +
	"first-parent merges no-merges reverse abbrev-commit abbrev? date= relative-date color? no-color regexp-ignore-case " +
	"extended-regexp fixed-strings perl-regexp all-match invert-grep source topo-order date-order author-date-order " +
	"full-history simplify-by-decoration ancestry-path? left-right cherry-pick cherry-mark boundary no-walk? summary " +
	"patch-with-stat raw full-index binary unified= word-diff? diff-filter= find-renames? find-copies? ignore-space-change " +
	"ignore-all-space ignore-blank-lines minimal histogram patience diff-algorithm= no-renames check show-signature " +
	"encoding= notes? no-notes expand-tabs? no-expand-tabs mailmap no-mailmap use-mailmap full-diff parents children " +
	"cached staged merge-base exit-code quiet relative? no-relative name-rev no-abbrev-commit no-prefix src-prefix= dst-prefix= " +
	"count objects objects-edge in-progress? max-parents= min-parents= no-merges-with? dirstat? cumulative? compact-summary " +
	"color-words? color-moved? ignore-cr-at-eol ignore-space-at-eol function-context inter-hunk-context= indent-heuristic " +
	"no-indent-heuristic text no-textconv no-ext-diff submodule? ignore-submodules? help"

// gitVerbs are git's verbs that read, with their grammar.
var gitVerbs = func() map[string]*grammar {
	out := map[string]*grammar{}
	for _, m := range []model{
		{names: "status", short: "sbu::vz", long: "short branch porcelain? long verbose untracked-files? ignored? ignore-submodules? column? no-column ahead-behind no-ahead-behind renames no-renames find-renames? show-stash null help"},
		{names: "log show whatchanged rev-list diff", short: "n:psuS:G:wbzM::C::RiW", numeric: true, long: gitDiffLong},
		{names: "rev-parse", short: "q", long: "short? abbrev-ref? verify quiet show-toplevel show-prefix show-cdup git-dir absolute-git-dir git-common-dir is-inside-work-tree is-inside-git-dir is-bare-repository is-shallow-repository symbolic symbolic-full-name all branches? tags? remotes? glob= sq sq-quote local-env-vars show-object-format? show-superproject-working-tree default= prefix= path-format= since= until= disambiguate= shared-index-path help"},
		{names: "describe", long: "all tags contains abbrev= candidates= exact-match debug long match= exclude= always first-parent dirty? broken? help"},
		{names: "ls-files", short: "cdmoiskuvftzx:X:", long: "cached deleted modified others ignored stage directory no-empty-directory unmerged killed exclude= exclude-from= exclude-per-directory= exclude-standard error-unmatch with-tree= full-name recurse-submodules abbrev? debug deduplicate eol format= sparse help", effects: "X,exclude-from:read"},
		{names: "ls-tree", short: "drtlz", long: "name-only name-status object-only long full-name full-tree abbrev? format= help"},
		{names: "blame annotate", short: "bltsefnpcL:M::C::w", long: "root show-stats score-debug show-name show-number porcelain line-porcelain incremental encoding= contents= date= progress no-progress first-parent ignore-rev= ignore-revs-file= color-lines color-by-age minimal show-email abbrev= help", effects: "contents,ignore-revs-file:read"},
		{names: "cat-file", short: "tsepZ", long: "batch? batch-check? batch-all-objects buffer unordered allow-unknown-type follow-symlinks filters no-filters path= help"},
		{names: "grep", short: "nivlLchHEFPe:f:IoqWpzaA:B:C:m:G", numeric: true, long: "cached untracked no-index recurse-submodules max-depth= only-matching quiet and or not all-match color? break heading show-function function-context threads= null column line-number count files-with-matches files-without-match ignore-case word-regexp invert-match extended-regexp fixed-strings perl-regexp basic-regexp full-name text no-textconv max-count= exclude-standard no-exclude-standard after-context= before-context= context= help", effects: "f:read"},
		{names: "shortlog", short: "nsecw::", long: "numbered summary email committer group= format= help"},
		{names: "ls-remote", short: "qht", long: "heads tags refs quiet exit-code get-url sort= symref help"},
		{names: "show-ref", short: "dqs::", long: "head tags heads branches verify dereference hash? abbrev? quiet exists exclude-existing? help"},
		{names: "for-each-ref", long: "count= shell perl python tcl sort= format= color? points-at= merged? no-merged? contains? no-contains? ignore-case omit-empty exclude= help"},
		{names: "merge-base name-rev count-objects check-ignore check-attr var version", short: "avHn", long: "all octopus independent is-ancestor fork-point tags refs= exclude= no-undefined always name-only annotate-stdin verbose human-readable quiet stdin no-index non-matching cached source= help"},
		{names: "branch", short: "arlvi", long: "all remotes list verbose contains= no-contains= merged? no-merged? sort= format= points-at= color? no-color column? no-column show-current omit-empty ignore-case abbrev? no-abbrev help"},
		{names: "tag", short: "ln::i", long: "list contains= no-contains= merged? no-merged? sort= format= points-at= color? column? no-column ignore-case omit-empty help"},
		{names: "remote", short: "v", long: "verbose help"},
		{names: "config", short: "lzf:", long: "get get-all get-regexp list name-only null show-origin show-scope global system local worktree file= blob= type= bool int bool-or-int path expiry-date default= includes no-includes help", effects: "f,file:read"},
		{names: "help", short: "ag", long: "all guides verbose config no-external-commands no-aliases"},
	} {
		g := compile(&m)
		for _, n := range strings.Fields(m.names) {
			out[n] = g
		}
	}
	return out
}()

var gitGlobal = compile(&model{exact: true, names: "git", short: "C:Phc:p", posix: true,
	long:    "git-dir= work-tree= namespace= no-pager no-replace-objects literal-pathspecs glob-pathspecs noglob-pathspecs icase-pathspecs no-optional-locks bare version help html-path man-path info-path no-advice no-lazy-fetch paginate exec-path? config-env= list-cmds= super-prefix= attr-source=",
	effects: "c,exec-path,config-env:destructive:git_configuration_on_the_command_line_can_name_any_program_to_run p,paginate:destructive:git_--paginate_runs_a_pager git-dir,work-tree:destructive:git_reads_the_configuration_of_a_directory_of_the_command's_choosing,_which_can_name_programs_to_run"})

// gitChanging are git's verbs that change a repository, and those that
// remove or rewrite what is there.
var (
	gitMutating = set(`pull fetch commit add merge rebase cherry-pick revert mv init clone am apply submodule worktree
		gc switch bisect notes sparse-checkout maintenance repack fsck archive bundle format-patch lfs checkout restore
		stash reset push branch tag remote config reflog`)
	gitDestructive = set(`clean rm filter-branch filter-repo prune update-ref replace`)
)

// git classifies git by its verb: the read verbs by their grammar; a
// verb that changes the repository is mutating, one that removes or
// rewrites is destructive; an alias or a verb the classifier does not
// know can run any program.
func (c *classifier) git(text string, rest []word) {
	opts, ops, ok := c.parse(text, gitGlobal, rest)
	if !ok {
		return
	}
	for _, p := range opts {
		if p.o.short == 'c' {
			c.add(text, Destructive, "git -c sets configuration that can name any program to run")
			return
		}
		if !c.option(text, gitGlobal, p.o, p.val) {
			return
		}
	}
	if len(ops) == 0 {
		c.add(text, ReadOnly, "git without a command prints its help")
		return
	}
	if !ops[0].lit {
		c.add(text, Destructive, "git with a command the classifier cannot read")
		return
	}
	verb, args := ops[0].v, ops[1:]
	if verb == "reflog" && (len(args) == 0 || args[0].lit && args[0].v == "show") {
		verb = "log"
	}
	if g := gitVerbs[verb]; g != nil && c.gitReads(verb, args) {
		c.check(text, g, args)
		return
	}
	switch {
	case gitDestructive[verb] || verb == "push" && (anyArg(args, "--force", "-f", "--force-with-lease", "--delete", "-d", "--mirror", "--prune") || anyPrefix(args, "+", ":")) ||
		verb == "reset" && anyArg(args, "--hard", "--merge", "--keep") || verb == "restore" ||
		(verb == "checkout" || verb == "stash") && anyArg(args, "--", "-f", "--force", "drop", "clear", "--discard-changes") ||
		(verb == "branch" || verb == "tag") && anyArg(args, "-D", "-d", "--delete") || verb == "reflog" && len(args) > 0 && !(args[0].lit && args[0].v == "show"):
		c.add(text, Destructive, "git "+verb+" removes, rewrites or discards")
	case verb == "config" || verb == "remote" || verb == "branch" || verb == "tag":
		// What a verb that also reads sets: configuration names programs
		// git runs later (an alias, core.pager, core.fsmonitor).
		c.add(text, Destructive, "git "+verb+" with these arguments writes configuration or refs (configuration can name programs git runs)")
	case gitMutating[verb]:
		c.add(text, Mutating, "git "+verb+" changes a repository")
	default:
		c.add(text, Destructive, "git "+verb+" is not a git command the classifier knows (an alias can run any program)")
	}
}

// gitReads reports whether a verb that can read or write (branch, tag,
// remote, config, reflog) is used to read.
func (c *classifier) gitReads(verb string, args []word) bool {
	ops := operands(args)
	switch verb {
	case "branch", "tag":
		return len(ops) == 0 || anyExact(args, "-l", "--list")
	case "remote":
		return len(ops) == 0 || len(ops) == 2 && ops[0].lit && (ops[0].v == "get-url" || ops[0].v == "show")
	case "config":
		return anyExact(args, "--get", "--get-all", "--get-regexp", "--list", "-l") || len(ops) > 0 && ops[0].lit && (ops[0].v == "list" || ops[0].v == "get")
	}
	return true
}
