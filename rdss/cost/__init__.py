"""What a deployment costs: the price table, the pricing rules, the estimate and the peers it is compared with."""
