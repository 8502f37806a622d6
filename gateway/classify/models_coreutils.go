package classify

// coreutilsModels are GNU coreutils' programs that read and print, with
// their options as `PROGRAM --help` lists them (coreutils 9.1).
var coreutilsModels = []model{
	{names: "head", short: "c:n:qvz", numeric: true,
		long: "bytes= lines= quiet silent verbose zero-terminated help version"},
	{names: "sort", short: "bcCdfghik:mMno:rRsS:t:T:uVz",
		long: "ignore-leading-blanks dictionary-order ignore-case general-numeric-sort ignore-nonprinting month-sort human-numeric-sort numeric-sort random-sort random-source= reverse sort= version-sort batch-size= check? compress-program= debug files0-from= key= merge output= stable buffer-size= field-separator= temporary-directory= parallel= unique zero-terminated help version",
		effects: "o,output:write T,temporary-directory:writedir compress-program:run random-source,files0-from:read"},
	{names: "uniq", short: "cdDf:is:uw:z", ops: ValueCustom, opsFn: opsUniq,
		long: "count repeated all-repeated? skip-fields= ignore-case skip-chars= unique zero-terminated check-chars= group? help version"},
	{names: "date", short: "d:f:I::r:Rs:u", ops: ValueCustom, opsFn: opsDate,
		long: "date= debug file= iso-8601? resolution reference= rfc-email rfc-3339= set= universal utc help version",
		effects: "s,set:privileged:date_--set_sets_the_clock f,file,r,reference:read"},
}
