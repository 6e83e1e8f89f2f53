package crd

import (
	"testing"

	"github.com/c5c3/glance-operator/test/crdcases"
)

func TestCreateValidation(t *testing.T) { crdcases.RunCreates(t, cl, namespace) }

func TestUpdateTransitionRules(t *testing.T) { crdcases.RunUpdates(t, cl, namespace) }
