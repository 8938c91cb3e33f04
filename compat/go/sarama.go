package main

type saramaDriver struct{}

func (saramaDriver) versions() map[string]string { return moduleVersions("github.com/IBM/sarama") }
func (saramaDriver) handle(s *session, req *request) (any, error) {
	return nil, notApplicable("todo")
}
