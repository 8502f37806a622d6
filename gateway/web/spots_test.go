package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFieldFlagsSayWhere: each field's hidden characters are listed under
// the field's name, with their line, column and byte offset.
func TestFieldFlagsSayWhere(t *testing.T) {
	got := FieldFlags(
		field{"command", "echo \u202eok"},
		field{"clean", "ls -l /srv"},
		field{"argv[3]", "first\r\nsecond\nth\xffird"},
		field{"cwd", strings.Repeat("\u200b", maxSpots+2)},
	)
	var where []string
	for _, f := range got {
		w := f.Field + ":"
		for _, s := range f.Spots {
			w += " " + s.Where() + " " + s.Text
		}
		if f.More > 0 {
			w += fmt.Sprintf(" +%d", f.More)
		}
		where = append(where, w)
	}
	want := []string{
		"command: column 6 (byte 5) ⟨U+202E⟩",
		`argv[3]: line 1, column 6 (byte 5) \r line 1, column 7 (byte 6) \n line 2, column 7 (byte 13) \n line 3, column 3 (byte 16) \xff`,
		"cwd: column 1 (byte 0) ⟨U+200B⟩ column 2 (byte 3) ⟨U+200B⟩ column 3 (byte 6) ⟨U+200B⟩ column 4 (byte 9) ⟨U+200B⟩ column 5 (byte 12) ⟨U+200B⟩ column 6 (byte 15) ⟨U+200B⟩ +2",
	}
	if diff := cmp.Diff(want, where); diff != "" {
		t.Errorf("positions differ (-want +got):\n%s", diff)
	}
	if n := got[0].Spots[0].Name; n != "U+202E RIGHT-TO-LEFT OVERRIDE" {
		t.Errorf("the command's character is named %q", n)
	}
}

// TestCardWarningNamesTheField: line breaks in the agent's argv are
// reported under argv, not under the command.
func TestCardWarningNamesTheField(t *testing.T) {
	f, _, srv, c := newTestHandler(t)
	card := callCard("argv", "uptime")
	card.Run.Process.Argv = append(card.Run.Process.Argv, "one\ntwo\nthree\nfour")
	f.add(card)
	login(t, c, srv.URL)
	_, body := get(t, c, srv.URL+"/ui/pending/cards")
	for _, want := range []string{
		`data-field="argv[4]"><strong class="field">argv[4]</strong>: <span class="flag-nl">3 × line breaks</span>`,
		`at line 1, column 4 (byte 3) <span class="esc nl" title="U&#43;000A LINE FEED">\n</span>; line 2, column 4 (byte 7)`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the card lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, `data-field="command"`) {
		t.Errorf("the card flags the command, which holds no hidden character")
	}
}

func TestFirstLine(t *testing.T) {
	long := strings.Repeat("x", confirmRunes+5)
	for _, tc := range []struct{ in, shown, cut string }{
		{"systemctl restart web", "systemctl restart web", ""},
		{"echo a\necho b\n", "echo a", "… cut: the first of 3 lines, 6 of 14 bytes shown; the card and the action's page show it in full"},
		{"echo a\r\necho b", "echo a", "… cut: the first of 2 lines, 6 of 14 bytes shown; the card and the action's page show it in full"},
		{long, long[:confirmRunes], "… cut: the start, 80 of 85 bytes shown; the card and the action's page show it in full"},
		{strings.Repeat("é", confirmRunes+1), strings.Repeat("é", confirmRunes), "… cut: the start, 160 of 162 bytes shown; the card and the action's page show it in full"},
	} {
		shown, cut := firstLine(tc.in)
		if shown != tc.shown || cut != tc.cut {
			t.Errorf("firstLine(%.20q) = %q, %q; want %q, %q", tc.in, shown, cut, tc.shown, tc.cut)
		}
	}
}

// TestDecisionConfirmationIsShort: after a decision the page repeats the
// id and the start of the command's first line, not the whole command.
func TestDecisionConfirmationIsShort(t *testing.T) {
	f, _, srv, c := newTestHandler(t)
	cmd := "rm -rf /srv/app/cache # first line\n" + strings.Repeat("echo the rest of a long script\n", 100)
	card := callCard("short", cmd)
	f.add(card)
	login(t, c, srv.URL)
	tok := formToken(t, c, srv.URL+"/ui/pending")
	res, _ := post(t, c, srv.URL+"/ui/approvals/"+card.ID+"/decision", url.Values{"csrf": {tok}, "decision": {"deny"}, "digest": {card.Digest}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("decision: status %d", res.StatusCode)
	}
	_, page := get(t, c, srv.URL+"/ui/pending")
	i, j := strings.Index(page, `id="flash"`), strings.Index(page, "</div>")
	if i < 0 || j < i {
		t.Fatalf("no confirmation:\n%s", page)
	}
	flash := page[i:j]
	for _, want := range []string{"Denied call " + card.ID, `<code class="text">rm -rf /srv/app/cache # first line</code>`, fmt.Sprintf("first of 102 lines, 34 of %d bytes shown", len(cmd))} {
		if !strings.Contains(flash, want) {
			t.Errorf("confirmation lacks %q: %s", want, flash)
		}
	}
	if strings.Contains(flash, "the rest of a long script") {
		t.Errorf("the confirmation repeats the whole command: %s", flash)
	}
}
