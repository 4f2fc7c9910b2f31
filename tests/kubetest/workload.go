package kubetest

import "fmt"

// WebDeployment is a Deployment of replicas pods of WebImage labelled
// app=name (imagePullPolicy Never: the image was imported), spread over
// the Nodes one per Node while it can, each printing its pod and node,
// stopped at once on eviction; with a PodDisruptionBudget of name that
// keeps minAvailable of them ready (none when minAvailable is 0).
func WebDeployment(name string, replicas, minAvailable int) string {
	doc := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: default
spec:
  replicas: %[2]d
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      terminationGracePeriodSeconds: 5
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: kubernetes.io/hostname
        whenUnsatisfiable: ScheduleAnyway
        labelSelector:
          matchLabels: {app: %[1]s}
      containers:
      - name: web
        image: %[3]s
        imagePullPolicy: Never
        env:
        - name: POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
        - name: NODE_NAME
          valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
`, name, replicas, WebImage)
	if minAvailable > 0 {
		doc += fmt.Sprintf(`---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: %[1]s
  namespace: default
spec:
  minAvailable: %[2]d
  selector:
    matchLabels: {app: %[1]s}
`, name, minAvailable)
	}
	return doc
}
