package classify

import "sync"

// misjudged are the programs a test made the classifier rate read_only
// whatever their arguments (MisjudgeForTest).
var misjudged struct {
	sync.Mutex
	names map[string]int
}

// MisjudgeForTest makes the classifier rate every simple command that runs
// program read_only, as a mistake in its tables would, until undo is
// called. It exists for the tests of what stands behind the classifier
// (enforce_read_only on the target): nothing but a test calls it.
func MisjudgeForTest(program string) (undo func()) {
	misjudged.Lock()
	defer misjudged.Unlock()
	if misjudged.names == nil {
		misjudged.names = map[string]int{}
	}
	misjudged.names[program]++
	var once sync.Once
	return func() {
		once.Do(func() {
			misjudged.Lock()
			defer misjudged.Unlock()
			if misjudged.names[program]--; misjudged.names[program] <= 0 {
				delete(misjudged.names, program)
			}
		})
	}
}

// isMisjudged reports whether a test made name read_only.
func isMisjudged(name string) bool {
	misjudged.Lock()
	defer misjudged.Unlock()
	return misjudged.names[name] > 0
}
