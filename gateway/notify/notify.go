// Package notify is the gateway's webhook front end: it follows the audit
// log and posts a signed notification for every approval request and
// decision (notify { url, secret_file }), so that reviewers hear of
// requests without watching the pages. It runs in one goroutine the engine
// owns: the action lifecycle never waits for it, and a webhook that is
// slow or down only delays later notifications.
//
// A Notification names the request and links to its card; it carries no
// command text, reason or requester (all attacker-influenced or possibly
// sensitive: the reviewer reads them on the card, where hidden characters
// are revealed) and no token or secret.
package notify

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/engine"
)

const (
	// Poll is how often the notifier reads new audit entries.
	Poll = time.Second
	// DefaultAttempt bounds one delivery attempt.
	DefaultAttempt = 10 * time.Second
)

// backoff are the waits between delivery attempts; after the last one the
// notification is dropped (and logged).
var backoff = []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second}

// Notification is the webhook's JSON body: what a receiver decodes.
type Notification struct {
	// Delivery identifies the Notification; retries repeat it.
	Delivery   string    `json:"delivery"`
	Event      string    `json:"event"` // approval.requested or approval.decided
	Time       time.Time `json:"time"`
	ApprovalID string    `json:"approval_id"`
	Kind       string    `json:"kind"`  // run or call
	State      string    `json:"state"` // pending, approved, denied, expired, withdrawn
	RunID      string    `json:"run_id"`
	Target     string    `json:"target"`
	Account    string    `json:"account"`
	DecidedBy  string    `json:"decided_by,omitempty"`
	URL        string    `json:"url,omitempty"`
}

// Options configure the notifier.
type Options struct {
	// Config is the notify block. Required.
	Config *config.Notify
	// Base returns the pages' base URL once the gateway listens ("" for
	// none); it is called once, when the first notification is due.
	Base func() string
	// Ready is closed once the gateway listens: nothing is sent before.
	Ready <-chan struct{}
	// Version goes into the User-Agent.
	Version string
	// Attempt bounds one delivery attempt; zero: DefaultAttempt.
	Attempt time.Duration
	// Logger receives the notifier's log; nil discards.
	Logger hclog.Logger
}

// Engine is what the notifier needs of the engine (*engine.Engine): its
// audit log to follow, its clock, and a goroutine whose end Close awaits.
type Engine interface {
	Audit() *engine.Audit
	Now() time.Time
	Go(f func(ctx context.Context))
}

// notifier follows the audit log.
type notifier struct {
	audit  *engine.Audit
	o      Options
	log    hclog.Logger
	secret []byte
	client *http.Client
	now    func() time.Time
}

// Start starts the webhook sender in a goroutine e owns, from the entries
// after the log's current end. A secret file that is missing, empty or
// readable by others disables notifications, loudly (the gateway runs on).
func Start(e Engine, o Options) {
	log := cmp.Or[hclog.Logger](o.Logger, hclog.NewNullLogger())
	secret, err := securefile.ReadSecret(o.Config.SecretFile, config.MaxSecretFile)
	if err == nil && len(bytes.TrimSpace(secret)) == 0 {
		err = fmt.Errorf("notify secret file %s is empty", o.Config.SecretFile)
	}
	if err != nil {
		log.Error("notifications disabled: the webhook secret cannot be used", "error", err)
		return
	}
	n := &notifier{
		audit: e.Audit(), o: o, log: log, secret: bytes.TrimRight(secret, "\r\n"), now: e.Now,
		client: &http.Client{
			Timeout: cmp.Or(o.Attempt, DefaultAttempt),
			// A signed Notification goes where it was configured to,
			// never where a redirect points.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	after, err := e.Audit().Reader().Size(context.Background())
	if err != nil {
		log.Error("notifications disabled: reading the audit log", "error", err)
		return
	}
	e.Go(func(ctx context.Context) { n.run(ctx, after-1) })
}

func (n *notifier) run(ctx context.Context, after int64) {
	select {
	case <-n.o.Ready:
	case <-ctx.Done():
		return
	}
	base := ""
	if n.o.Base != nil {
		base = n.o.Base()
	}
	tick := time.NewTicker(Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for rec, err := range n.audit.Reader().Entries(ctx, after) {
			if err != nil {
				if ctx.Err() == nil {
					n.log.Warn("reading the audit log", "error", err)
				}
				break
			}
			after = rec.Seq
			if ev, ok := n.notificationOf(rec.Entry, base); ok {
				n.deliver(ctx, ev)
			}
		}
	}
}

func (n *notifier) notificationOf(e auditchain.Entry, base string) (Notification, bool) {
	ae, ok := engine.ApprovalEventOf(e)
	if !ok {
		return Notification{}, false
	}
	ev := Notification{
		Delivery: fmt.Sprintf("%s/%d", n.audit.Origin(), ae.Seq), Event: ae.Kind.String(), Time: ae.Time.UTC(),
		ApprovalID: ae.ID, Kind: string(ae.Request), State: ae.Status, RunID: ae.RunID,
		Target: ae.Target, Account: ae.Account, DecidedBy: ae.DecidedBy,
	}
	if base != "" {
		if ae.Kind == auditchain.KindApprovalRequested {
			ev.URL = base + "/ui/pending#" + ev.ApprovalID
		} else {
			ev.URL = base + "/ui/runs#" + ev.RunID
		}
	}
	return ev, true
}

// deliver posts ev until the webhook accepts it (2xx), refuses it for good
// (4xx other than 408 and 429), the retries run out, or ctx ends.
func (n *notifier) deliver(ctx context.Context, ev Notification) {
	body, err := json.Marshal(ev)
	if err != nil {
		n.log.Error("encoding a Notification", "error", err)
		return
	}
	for attempt := 0; ; attempt++ {
		status, err := n.post(ctx, ev, body)
		switch {
		case err == nil && status/100 == 2:
			return
		case err == nil && status/100 == 4 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests:
			n.log.Error("the webhook refused a Notification; not retrying", "delivery", ev.Delivery, "status", status)
			return
		}
		if attempt == len(backoff) || ctx.Err() != nil {
			n.log.Error("Notification dropped after retries", "delivery", ev.Delivery, "status", status, "error", err)
			return
		}
		n.log.Warn("Notification failed; retrying", "delivery", ev.Delivery, "status", status, "error", err, "in", backoff[attempt])
		select {
		case <-time.After(backoff[attempt]):
		case <-ctx.Done():
			return
		}
	}
}

// post makes one delivery attempt. The signature covers the timestamp and
// the body, so a captured Notification cannot be replayed later under a
// fresh timestamp: X-Airlock-Signature is "sha256=" and the hex
// HMAC-SHA256, keyed with the secret, of "TIMESTAMP.BODY".
func (n *notifier) post(ctx context.Context, ev Notification, body []byte) (int, error) {
	ts := strconv.FormatInt(n.now().Unix(), 10)
	mac := hmac.New(sha256.New, n.secret)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.o.Config.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "airlock/"+n.o.Version)
	req.Header.Set("X-Airlock-Event", ev.Event)
	req.Header.Set("X-Airlock-Delivery", ev.Delivery)
	req.Header.Set("X-Airlock-Timestamp", ts)
	req.Header.Set("X-Airlock-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	res, err := n.client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	res.Body.Close()
	return res.StatusCode, nil
}
