package testkit

// Password is the password test reviewers log in with (and the passphrase
// of test keys that need one): one value, so that a log or a page that
// shows it is found by one search.
const Password = "correct horse battery staple"
