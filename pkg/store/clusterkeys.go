package store

// ClustersDir holds the KubernetesCluster objects.
const ClustersDir = "clusters/"

// ClusterKey is where KubernetesCluster name lives.
func ClusterKey(name string) string { return ClustersDir + name }
