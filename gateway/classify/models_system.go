package classify

// systemModels are the programs of util-linux, procps and their kind that
// read the system's state, with their options as `PROGRAM --help` lists
// them.
var systemModels = []model{}
