include $(sort $(wildcard $(BR2_EXTERNAL_KVMD_PATH)/package/*/*.mk))
