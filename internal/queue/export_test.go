package queue

// CreatedMeanwhile is createdMeanwhile, for the tests of package queue_test.
var CreatedMeanwhile = createdMeanwhile
