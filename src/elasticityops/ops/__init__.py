"""Operations: render what a team applies (GKE set-up, GPU elasticity stack) and `doctor`, which
checks a live cluster and explains every fault with its fix."""
