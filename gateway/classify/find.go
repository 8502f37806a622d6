package classify

import (
	"regexp"
	"strings"
)

// findPrimaries are find's expression words the classifier knows, with
// the number of arguments each takes: options, tests and the actions
// that print. The rest of its actions are handled by name (-delete,
// -exec and their kind, -fprint and their kind).
var findPrimaries = map[string]int{
	"(": 0, ")": 0, "!": 0, ",": 0, "-not": 0, "-a": 0, "-and": 0, "-o": 0, "-or": 0,
	"-daystart": 0, "-follow": 0, "-nowarn": 0, "-warn": 0, "-regextype": 1,
	"-depth": 0, "-d": 0, "-files0-from": 1, "-maxdepth": 1, "-mindepth": 1, "-mount": 0, "-noleaf": 0, "-xdev": 0,
	"-ignore_readdir_race": 0, "-noignore_readdir_race": 0,
	"-amin": 1, "-anewer": 1, "-atime": 1, "-cmin": 1, "-cnewer": 1, "-context": 1, "-ctime": 1, "-empty": 0,
	"-false": 0, "-fstype": 1, "-gid": 1, "-group": 1, "-ilname": 1, "-iname": 1, "-inum": 1, "-ipath": 1,
	"-iwholename": 1, "-iregex": 1, "-links": 1, "-lname": 1, "-mmin": 1, "-mtime": 1, "-name": 1, "-newer": 1,
	"-nouser": 0, "-nogroup": 0, "-path": 1, "-perm": 1, "-regex": 1, "-readable": 0, "-writable": 0,
	"-executable": 0, "-wholename": 1, "-size": 1, "-true": 0, "-type": 1, "-uid": 1, "-used": 1, "-user": 1,
	"-xtype": 1, "-samefile": 1,
	"-print": 0, "-print0": 0, "-printf": 1, "-ls": 0, "-prune": 0, "-quit": 0,
}

// findNewer is -newerXY (-newermt DATE).
var findNewer = regexp.MustCompile(`^-newer[aBcmt][aBcmt]$`)

// findWrites are find's actions that write the file they name.
var findWrites = map[string]bool{"-fprint": true, "-fprint0": true, "-fprintf": true, "-fls": true}

// find classifies find: its expression word by word; an expression word
// it does not know, or one that is not a literal, is not proved.
func (c *classifier) find(text string, rest []word, depth int) {
	i := 0
	// Options before the starting points: -H -L -P -O<level> -D <opts>.
	for i < len(rest) && rest[i].lit && (rest[i].v == "-H" || rest[i].v == "-L" || rest[i].v == "-P" || strings.HasPrefix(rest[i].v, "-O")) {
		i++
	}
	if i < len(rest) && rest[i].lit && rest[i].v == "-D" {
		i += 2
	}
	// The starting points.
	for i < len(rest) {
		w := rest[i]
		if w.lit && (strings.HasPrefix(w.v, "-") || w.v == "(" || w.v == "!" || w.v == ",") || !w.lit && !w.safe {
			break
		}
		i++
	}
	for ; i < len(rest); i++ {
		w := rest[i]
		if !w.lit {
			c.add(text, Destructive, "find: the expression word "+w.src+" is not a literal")
			return
		}
		switch n, known := findPrimaries[w.v]; {
		case known || findNewer.MatchString(w.v):
			if !known {
				n = 1
			}
			for _, a := range rest[i+1 : min(i+1+n, len(rest))] {
				if !a.one {
					c.add(text, Destructive, "find "+w.v+": "+a.src+" may expand to more than one argument")
					return
				}
			}
			i += n
		case w.v == "-delete":
			c.add(text, Destructive, "find -delete removes files")
		case w.v == "-exec" || w.v == "-execdir" || w.v == "-ok" || w.v == "-okdir":
			j := i + 1
			for j < len(rest) && !(rest[j].lit && (rest[j].v == ";" || rest[j].v == "+")) {
				j++
			}
			args := make([]word, 0, j-i-1)
			for _, a := range rest[i+1 : j] {
				if a.lit && strings.Contains(a.v, "{}") {
					a = word{src: a.src, one: true, safe: !strings.HasPrefix(a.v, "-")}
				}
				args = append(args, a)
			}
			if w.v == "-execdir" || w.v == "-okdir" {
				// The command runs in each found file's directory.
				c.cwd.unknown = true
			}
			if len(args) > 0 {
				c.program(text, args, depth+1)
			}
			i = j
		case findWrites[w.v]:
			if i+1 < len(rest) {
				c.writeWord(text, rest[i+1], "find "+w.v+" writes", writeOpen)
			}
			i++
			if w.v == "-fprintf" {
				i++
			}
		default:
			c.add(text, Destructive, "find "+w.v+" is not an expression the classifier knows")
			return
		}
	}
	c.add(text, ReadOnly, "find lists files")
}
