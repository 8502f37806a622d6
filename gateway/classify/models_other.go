package classify

// otherModels are the other programs modelled by their option grammar.
var otherModels = []model{}
