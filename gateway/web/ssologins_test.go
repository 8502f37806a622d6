package web

import (
	"fmt"
	"testing"
	"time"
)

// The table of begun single sign-ons refuses a new login when its address
// bucket or the whole table is full, never dropping one in progress; a
// place frees when a login expires, on the handler's clock.
func TestSSOLoginsRefuseWhenFull(t *testing.T) {
	var l ssoLogins
	at := t0
	put := func(state, bucket string) (time.Time, bool) {
		return l.put(state, ssoLogin{bucket: bucket, at: at})
	}
	for i := range maxBucketSSOLogins {
		if _, ok := put(fmt.Sprint("loopback-", i), "loopback"); !ok {
			t.Fatalf("login %d from loopback refused", i)
		}
		at = at.Add(time.Second)
	}
	retry, ok := put("one-too-many", "loopback")
	if ok {
		t.Fatal("a login over loopback's share was kept")
	}
	if want := t0.Add(ssoLoginTTL); !retry.Equal(want) {
		t.Errorf("retry at %v, want %v (when the first loopback login expires)", retry, want)
	}
	if _, ok := l.take("loopback-0", at); !ok {
		t.Error("the first login in progress was dropped for a new one")
	}
	if _, ok := put("elsewhere", "192.0.2.1"); !ok {
		t.Error("a login from another bucket was refused while loopback's share is full")
	}

	// The whole table: every place taken by buckets of their own.
	for i := 0; len(l.m) < maxSSOLogins; i++ {
		if _, ok := put(fmt.Sprint("many-", i), fmt.Sprint("198.51.100.", i)); !ok {
			t.Fatalf("login %d refused before the table is full (%d)", i, len(l.m))
		}
	}
	if _, ok := put("full", "203.0.113.7"); ok {
		t.Error("a login was kept in a full table")
	}
	if _, ok := l.take("loopback-1", at); !ok {
		t.Error("a login in progress was dropped from the full table")
	}

	// Ten minutes on, the first ones have expired: there is room again.
	at = t0.Add(ssoLoginTTL + 3*time.Second)
	if _, ok := put("later", "loopback"); !ok {
		t.Error("no room once the oldest logins expired")
	}
	if _, ok := l.take("loopback-2", at); ok {
		t.Error("an expired login was taken")
	}
}
