package web

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// maxSpots is how many positions a field's warning lists; the rest are
// counted.
const maxSpots = 6

// FieldFlag is the hidden characters of one text the agent sent (its
// command, an argument, its working directory …), for the warning that
// says where they are.
type FieldFlag struct {
	// Field names the text: "command", "argv[2]", "cwd", …
	Field string
	// Flags count the characters by class.
	Flags []Flag
	// Spots are the first maxSpots of them, in order; More counts the rest.
	Spots []Spot
	More  int
}

// Spot is one hidden character and where it is in its text.
type Spot struct {
	// Line and Col are 1-based, Col counting characters; Byte is the
	// 0-based byte offset.
	Line, Col, Byte int
	// Lines is set when the text has more than one line, so the line is
	// worth naming.
	Lines bool
	Kind  Hidden
	// Text is the escape as the page shows it, Name the character's name.
	Text, Name string
}

// Where says where the character is, in a reviewer's words.
func (s Spot) Where() string {
	if s.Lines {
		return fmt.Sprintf("line %d, column %d (byte %d)", s.Line, s.Col, s.Byte)
	}
	return fmt.Sprintf("column %d (byte %d)", s.Col, s.Byte)
}

// Class is the spot's CSS class.
func (s Spot) Class() string { return s.Kind.Class() }

// field is one named text for FieldFlags.
type field struct{ name, text string }

// FieldFlags lists, for every field holding hidden characters, what they
// are and where; fields without any are left out.
func FieldFlags(fields ...field) []FieldFlag {
	var out []FieldFlag
	for _, f := range fields {
		flags := Flags(f.text)
		if flags == nil {
			continue
		}
		spots, total := findSpots(f.text)
		out = append(out, FieldFlag{Field: f.name, Flags: flags, Spots: spots, More: total - len(spots)})
	}
	return out
}

// findSpots returns the first maxSpots hidden characters of s with their
// positions, and how many there are in all.
func findSpots(s string) ([]Spot, int) {
	var spots []Spot
	total, line, col := 0, 1, 1
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		k, text, name := Visible, "", ""
		switch {
		case r == utf8.RuneError && size <= 1:
			k, size = Invalid, 1
			text, name = fmt.Sprintf(`\x%02x`, s[i]), fmt.Sprintf("byte 0x%02X: not valid UTF-8", s[i])
		default:
			k = classify(r)
			switch k {
			case Visible:
			case NonASCII:
				text, name = string(r)+" "+codePoint(r), codePoint(r)
			default:
				text, name = escape(r), describe(r)
			}
		}
		if k != Visible {
			total++
			if len(spots) < maxSpots {
				spots = append(spots, Spot{Line: line, Col: col, Byte: i, Kind: k, Text: text, Name: name})
			}
		}
		i += size
		if k == Newline && !(r == '\r' && i < len(s) && s[i] == '\n') {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	if line > 1 {
		for j := range spots {
			spots[j].Lines = true
		}
	}
	return spots, total
}

// cardFields are the texts of a card that its requester controls, named.
func cardFields(c Card) []field {
	fs := []field{{"command", c.Command}}
	if c.Stdin != nil {
		fs = append(fs, field{"standard input", c.Stdin.Text})
	}
	fs = append(fs, field{"the agent's reason", c.AgentReason})
	if c.Run == nil || c.Run.Requester != c.Requester {
		fs = append(fs, field{"requester", c.Requester})
	}
	if c.Run != nil {
		fs = append(fs, runFields(c.Run)...)
	}
	return fs
}

// runFields are the texts of a run that its requester controls, named.
func runFields(r *Run) []field {
	fs := []field{{"run requester", r.Requester}}
	if p := r.Process; p != nil {
		fs = append(fs, field{"executable", p.Exe}, field{"cwd", p.Cwd}, field{"user", p.User})
		for i, a := range p.Argv {
			fs = append(fs, field{"argv[" + strconv.Itoa(i) + "]", a})
		}
		for _, q := range p.Parents {
			pid := strconv.Itoa(q.PID)
			fs = append(fs, field{"parent " + pid + " name", q.Comm}, field{"parent " + pid + " executable", q.Exe})
		}
	}
	return fs
}
