package queue

// WorkSubjectTemplate is the form of the work subjects (WorkSubject),
// with their variable tokens in braces: a span's name and its
// messaging.destination.template, which must not vary by job.
func (o Options) WorkSubjectTemplate() string {
	o.defaults()
	return o.Prefix + ".jobs.{owner}.{priority}.{slot}.{serial}"
}

// ResultSubjectTemplate is the form of the results subjects
// (ResultSubject), with their variable tokens in braces.
func (o Options) ResultSubjectTemplate() string {
	o.defaults()
	return o.Prefix + ".results.{job}.{batch}"
}
