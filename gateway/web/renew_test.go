package web

import (
	"strings"
	"testing"
)

// TestGoldenRenewalCard pins how a run request that renews a run reads:
// titled a renewal, naming the run it renews (linked to the runs page)
// and whose identity asks — the same process for a local run.
func TestGoldenRenewalCard(t *testing.T) {
	f, _, srv, c := newTestHandler(t)
	card := callCard("renewal", "uptime")
	card.Kind = "run"
	card.Renews = runID("expired")
	f.add(card)
	login(t, c, srv.URL)
	_, body := get(t, c, srv.URL+"/ui/pending/cards")
	for _, want := range []string{"Run renewal", `id="renews-` + card.ID + `"`, "Renewal of run <a href=\"/ui/runs#" + card.Renews + "\">",
		"the same process", "decide it as a new run"} {
		if !strings.Contains(body, want) {
			t.Errorf("the card lacks %q", want)
		}
	}
	golden(t, "card-renewal.golden.html", body)
}
