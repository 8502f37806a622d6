package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
)

// Reviewers lists the reviewer accounts; never a password or its hash.
func (e *Admin) Reviewers(ctx context.Context) ([]api.Reviewer, error) {
	list, err := e.store.Accounts().List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.Reviewer, 0, len(list))
	for _, r := range list {
		out = append(out, api.Reviewer{Name: r.Name, Enabled: r.Enabled, Source: r.Source, CreatedAt: r.CreatedAt})
	}
	return out, nil
}

// ReviewerChange is an operator's change to a reviewer account.
type ReviewerChange int

// The changes ChangeReviewer makes.
const (
	ReviewerAdd ReviewerChange = iota
	ReviewerDisable
	ReviewerEnable
	ReviewerRemove
	ReviewerPassword
)

// ChangeReviewer adds, disables, enables or removes the reviewer name, or
// gives it a new password (password is used by add and password only);
// by says who, and the change is recorded in the audit log before it
// takes effect. Disable, remove and a new password end the reviewer's
// sessions and tokens at once.
func (e *Admin) ChangeReviewer(ctx context.Context, change ReviewerChange, name string, password Secret, by string) error {
	acc := e.store.Accounts()
	var err error
	switch change {
	case ReviewerAdd:
		err = acc.Add(ctx, name, password.s, by)
	case ReviewerDisable, ReviewerEnable:
		err = acc.SetEnabled(ctx, name, change == ReviewerEnable, by)
	case ReviewerRemove:
		err = acc.Remove(ctx, name, by)
	case ReviewerPassword:
		err = acc.SetPassword(ctx, name, password.s, by)
	default:
		return fmt.Errorf("unknown reviewer change %d", change)
	}
	if err == nil {
		e.accountsDone()
	}
	return ReviewerError(name, err)
}

// accountsDone wakes what waits for a change to reviewer accounts.
func (e *core) accountsDone() {
	e.accountsMu.Lock()
	close(e.accountsChanged)
	e.accountsChanged = make(chan struct{})
	e.accountsMu.Unlock()
}

// RenameReviewer gives the reviewer name the name newName (see
// approvals.Accounts.Rename), recorded in the audit log before it takes
// effect; by says who. The reviewer's sessions and tokens end.
func (e *Admin) RenameReviewer(ctx context.Context, name, newName, by string) error {
	if err := RenameAllowed(e.conf().cfg, name, newName); err != nil {
		return err
	}
	err := e.store.Accounts().Rename(ctx, name, newName, by)
	switch {
	case err == nil:
		e.accountsDone()
	case errors.Is(err, approvals.ErrUnknownReviewer):
		return ReviewerError(name, err)
	}
	return ReviewerError(newName, err)
}

// RenameAllowed refuses a rename that would drop the identities the
// configuration links to the account (a reviewer "NAME" block, which
// keeps a reviewer from deciding for them): the block must be there under
// the new name first.
func RenameAllowed(cfg *config.Config, name, newName string) error {
	old, linked := cfg.ReviewerLinks[name]
	if !linked || len(old) == 0 {
		return nil
	}
	if now, ok := cfg.ReviewerLinks[newName]; ok && !slices.ContainsFunc(old, func(l string) bool { return !slices.Contains(now, l) }) {
		return nil
	}
	return refuse(ErrInvalid, fmt.Sprintf("the configuration links identities to reviewer %q (its reviewer %q block): "+
		"copy that block as reviewer %q first, with every link, and reload; then rename, and remove the old block after",
		name, name, newName))
}

// AccountsChanged is closed at the next change to a reviewer account:
// what holds a reviewer's session open (an event stream) checks it again.
func (e *Review) AccountsChanged() <-chan struct{} {
	e.accountsMu.Lock()
	defer e.accountsMu.Unlock()
	return e.accountsChanged
}

// ReviewerError says what an account change's error means to an
// operator (the CLI's offline path uses it too).
func ReviewerError(name string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, approvals.ErrUnknownReviewer):
		return refuse(ErrNotFound, fmt.Sprintf("no reviewer %q (see airlock reviewer list)", clip(name, maxNameLen)))
	case errors.Is(err, approvals.ErrReviewerExists):
		return refuse(ErrInvalid, fmt.Sprintf("reviewer %q exists already (names differing only in case are one name)", name))
	case errors.Is(err, approvals.ErrWeakPassword):
		return refuse(ErrInvalid, fmt.Sprintf("the password must be %d to 1024 bytes long", approvals.MinPasswordLen))
	case errors.Is(err, approvals.ErrSSOAccount):
		return refuse(ErrInvalid, fmt.Sprintf("reviewer %q logs in through single sign-on: it has no password here", name))
	case errors.Is(err, approvals.ErrBadReviewerName):
		return refuse(ErrInvalid, fmt.Sprintf("invalid reviewer name %q: use 1 to 64 letters, digits, '.', '_' or '-'", clip(name, maxNameLen)))
	}
	return classify(err)
}
