package classify

// writerModels are programs that write the files their arguments name:
// their grammar says which arguments those are, so the write is
// classified by its path.
var writerModels = []model{
	{names: "tee", short: "aip", ops: ValueCustom, opsFn: opsEachOpened,
		long: "append ignore-interrupts output-error? help version"},
	{names: "touch", short: "acd:fhmr:t:", ops: ValueCustom, opsFn: opsEachChanged,
		long:    "no-create date= no-dereference reference= time= help version",
		effects: "r,reference:read"},
	{names: "mv", short: "bfinS:t:TuvZ", ops: ValueCustom, opsFn: opsMove,
		long:    "backup? force interactive no-clobber strip-trailing-slashes suffix= target-directory= no-target-directory update verbose context help version",
		effects: "t,target-directory:writedir"},
}
