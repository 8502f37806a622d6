package auditchain

/*
#include <malloc.h>

// airlock_return_large makes the C allocator give large blocks back to the
// system when they are freed: SQLite copies each blob it stores or reads
// (megabytes of command output) into memory it allocates, and glibc,
// whose threshold for mapping a block rises to the largest one freed,
// would otherwise keep what one large action needed in its arenas for
// good. Elsewhere it does nothing.
static void airlock_return_large(void) {
#ifdef M_MMAP_THRESHOLD
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
}
*/
import "C"

import "sync"

var returnLarge sync.Once

// returnLargeAllocations fixes the C allocator's threshold for blocks it
// maps (and unmaps when freed) at 1 MiB, once per process.
func returnLargeAllocations() { returnLarge.Do(func() { C.airlock_return_large() }) }
