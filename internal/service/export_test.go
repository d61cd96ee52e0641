package service

// OneLine is oneLine, for the tests of package service_test.
var OneLine = oneLine
