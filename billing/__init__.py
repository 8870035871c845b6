"""Chargeback: the GPU-hour ledger, rates, reports and procurement analysis."""
